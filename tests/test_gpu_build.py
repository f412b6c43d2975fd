"""Building for an NVIDIA GPU on any machine: targets completed from a GPU's description, default GPU schedules
on every function, MetaSchedule's CUDA search, and CUDA kernels compiled by NVRTC for the GPU's architecture."""

import pytest

from tunewise import target
from tunewise.errors import TargetError
from tunewise.lowering import default_schedules


def test_a_gpu_description_gives_a_complete_target(gpu_description):
    config = target.cuda_config(gpu_description)
    assert config["arch"] == "sm_90a" and config["max_threads_per_block"] == 1024
    assert config["max_shared_memory_per_block"] == 49152 and config["thread_warp_size"] == 32
    assert config["l2_cache_size_bytes"] == 52428800 and config["host"] == target.host_cpu()
    built = target.resolve(config)
    assert target.is_gpu(built) and not target.is_gpu(target.resolve(None))
    assert target.num_cores(built) == target.num_cores(target.resolve(None))  # its host's: the search's threads


def test_models_take_winograd_convolutions_on_a_cpu_and_channels_last_on_a_gpu_unless_asked_otherwise(gpu_description):
    from tunewise.lowering import graph

    assert graph.default_level(target.resolve(None)) == "winograd"
    assert graph.default_level(target.resolve(target.cuda_config(gpu_description))) == "nhwc"


def test_a_json_cuda_target_is_completed_and_keeps_what_it_gives(gpu_description):
    completed = target.complete({"kind": "cuda", "max_shared_memory_per_block": 32768}, gpu_description)
    assert completed["max_shared_memory_per_block"] == 32768 and completed["arch"] == "sm_90a"
    assert target.complete({"kind": "cuda", "arch": "sm_80", "max_threads_per_block": 512,
                            "max_shared_memory_per_block": 1, "thread_warp_size": 32}, None)["arch"] == "sm_80"


def test_a_cpu_target_without_cores_gets_those_this_process_may_use():
    import os

    def cores(spec) -> int:
        return int(target.resolve(spec).attrs["num-cores"])

    mine = os.sched_getaffinity(0)
    assert cores('{"kind": "llvm", "mcpu": "x86-64"}') == cores(None) == len(mine) == target.usable_cores()
    try:
        os.sched_setaffinity(0, {min(mine)})  # as `taskset -c 0` or a one-core node of a cluster starts it
        assert cores('{"kind": "llvm", "mcpu": "x86-64"}') == cores(None) == target.usable_cores() == 1
    finally:
        os.sched_setaffinity(0, mine)


@pytest.mark.skipif(target.cuda_description() is not None, reason="GPU 0 completes the target")
@pytest.mark.parametrize("spec, expected", [
    ('{"kind": "cuda", "arch": "sm_90a"}', "the cuda target lacks max_threads_per_block, "
     "max_shared_memory_per_block, thread_warp_size, and this machine has no NVIDIA GPU"),
    ("cuda", "target cuda needs an NVIDIA GPU, and this machine has none"),
])
def test_an_incomplete_cuda_target_is_refused_without_a_gpu(spec, expected):
    with pytest.raises(TargetError, match=expected):
        target.resolve(spec)


def test_default_schedules_bind_every_loop_nest_on_a_gpu_only(gpu_target, host_target):
    from tvm import te

    a = te.placeholder((64, 64), name="a")
    k = te.reduce_axis((0, 64), name="k")
    row_sum = te.compute((64,), lambda i: te.sum(a[i, k], axis=k), name="row_sum")
    import tvm

    mod = tvm.IRModule({"main": te.create_prim_func([a, row_sum])})
    assert default_schedules.apply(mod, host_target) is mod
    scheduled = default_schedules.apply(mod, gpu_target)
    script = scheduled.script()
    assert 'thread="blockIdx.x"' in script and 'thread="threadIdx.x"' in script
    assert "thread=" not in mod.script() and scheduled["main"].attrs["tirx.is_scheduled"]


def _cuda_source(executable) -> str:
    def walk(module):
        yield module
        for imported in module.imports:
            yield from walk(imported)

    (cuda,) = [m for m in walk(executable.mod) if m.kind == "cuda"]
    return cuda.inspect_source()


_CUBIN, _FATBIN = b"\x7fELF", b"\x50\xed\x55\xba"


def _compiled(source: str, target) -> bytes:
    """``source`` compiled for ``target``'s architecture as TVM compiles CUDA (NVRTC: a cubin; nvcc: a fat
    binary), by the compiler :func:`tunewise.tuning.tvm_env.use_cuda_compiler` chose."""
    import tvm

    with target:
        return bytes(tvm.get_global_func("tvm_callback_cuda_compile")(source))


def _model(name: str):
    """Zoo model ``name``; ``inception-cell``: one cell of the zoo's ``inception-cells``, narrow (its branches,
    pooling and concatenation, the same functions as the four cells' without their compile time)."""
    from tunewise.importing import frontend

    if name != "inception-cell":
        return frontend.load(name)
    import torch

    from tunewise.zoo import architectures

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = architectures.InceptionCells(channels=16, cells=1)
        return frontend.from_torch(model, torch.randn(1, 3, 16, 16), name=name)


@pytest.mark.tvm
@pytest.mark.parametrize("name", ["tiny-cnn", "tiny-gpt", "inception-cell"])
def test_zoo_models_compile_for_a_gpu_with_default_schedules(gpu_target, name):
    """Every function of the model at the default graph level, tasks and glue, runs under a default GPU
    schedule: TVM refuses to build a kernel with an unbound loop nest, and the CUDA compiler compiles every
    kernel for the GPU's architecture."""
    from tunewise.delivery import compile as compiler
    from tunewise.lowering import tasks

    model = tasks.extract(_model(name), gpu_target)
    source = _cuda_source(compiler.build(model))
    assert source.count("__global__") >= len(model.tasks)
    assert _compiled(source, gpu_target)[:4] in (_CUBIN, _FATBIN)


@pytest.mark.tvm
def test_a_tuned_cuda_schedule_is_compiled_and_the_rest_default(gpu_target, tmp_path):
    """MetaSchedule's CUDA rules search a task for the completed target; a candidate built in the builder pool,
    and its record applied at compilation, replaces that task's default schedule alone."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise.delivery import compile as compiler
    from tunewise.importing import frontend
    from tunewise.lowering import tasks
    from tunewise.tuning import measure
    from tunewise.tuning.search import TaskSearch

    model = tasks.extract(frontend.load("tiny-mlp"), gpu_target)
    search = TaskSearch(model.task_mods[0], model.tasks[0].name, gpu_target, 0, 1, 4)
    database = ms.database.MemoryDatabase()
    (candidate, _), *_ = search.sample(4, database, ms.cost_model.RandomModel())
    pool = measure.BuilderPool(1, scratch=str(tmp_path))
    try:
        assert pool.submit(candidate.sch.mod, gpu_target).result()[0].endswith(".tar")
    finally:
        pool.close()
    database.commit_tuning_record(ms.database.TuningRecord(
        candidate.sch.trace, database.commit_workload(model.task_mods[0]), [1e-9], gpu_target, candidate.args_info))
    untuned = _cuda_source(compiler.build(model))
    tuned = _cuda_source(compiler.build(model.with_default_latencies([1.0] * len(model.tasks)), database))
    assert tuned != untuned and tuned.count("__global__") == untuned.count("__global__")
    assert _compiled(tuned, gpu_target)[:4] in (_CUBIN, _FATBIN)


def test_a_gpu_searches_float32_tasks_without_tensor_cores(gpu_target, host_target):
    import tvm
    from tvm import te

    from tunewise.lowering import spaces

    def doubled(dtype):
        a = te.placeholder((4,), name="a", dtype=dtype)
        return tvm.IRModule({"main": te.create_prim_func([a, te.compute((4,), lambda i: a[i] * 2, name="b")])})

    assert spaces.rules(doubled("float32"), gpu_target) == "cuda"
    assert spaces.rules(doubled("float16"), gpu_target) == "cuda-tensorcore"
    assert spaces.rules(doubled("float16"), host_target) == "from-target"
