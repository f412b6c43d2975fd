"""Compile tiny-mlp with and without records, check outputs, save, load and run the artifact."""

import dataclasses

import numpy as np
import pytest

from tunewise.delivery import artifact, timing
from tunewise.delivery import compile as compiler
from tunewise.errors import ImportMismatchError, InputError, ModelInputError, VerificationError
from tunewise.importing import frontend
from tunewise.lowering import tasks

pytestmark = pytest.mark.tvm


def _fake_best_record(model, database, k, latency):
    """Commit the default schedule of task k (a one-instruction trace) as a record with the given latency."""
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    from tunewise.lowering.tasks import args_info

    mod = model.task_mods[k]
    sch = s_tir.Schedule(mod)
    sch.get_sblock("root")  # MetaSchedule ignores records with an empty trace
    workload = database.commit_workload(mod)
    database.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, [latency], model.target,
                                                           args_info(mod)))


def test_only_records_faster_than_the_default_are_applied(tiny_mlp):
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.MemoryDatabase()
    _fake_best_record(tiny_mlp, db, 0, tiny_mlp.tasks[0].default_latency / 2)
    _fake_best_record(tiny_mlp, db, 1, tiny_mlp.tasks[1].default_latency * 2)
    chosen = compiler.best_records_database(tiny_mlp, db)
    target, (t0, t1) = tiny_mlp.target, tiny_mlp.task_mods
    assert chosen.query_tuning_record(t0, target, "t0") is not None  # what compile_relax asks
    assert chosen.query_tuning_record(t1, target, "t1") is None


def test_compile_verify_save_load_run(tiny_mlp, tmp_path):
    compiled = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target, {"model": "tiny-mlp"})
    error = compiler.verify(compiled, tiny_mlp.inputs, tiny_mlp.reference_outputs)
    assert error < 1e-5
    latency = compiled.time(*tiny_mlp.inputs, repeat=3, min_repeat_ms=1)
    assert 0 < latency.minimum <= latency.median and latency.repeats == 3

    path = compiled.save(str(tmp_path / "artifact"))
    loaded = compiler.load(path)
    assert loaded.metadata["model"] == "tiny-mlp"
    assert loaded.target.kind.name == "llvm"
    np.testing.assert_allclose(loaded(*tiny_mlp.inputs)[0], compiled(*tiny_mlp.inputs)[0])
    again = compiler.load(loaded.save(str(tmp_path / "again")))  # a loaded model saves its library again
    assert again.metadata[artifact.CHECKSUM] == loaded.metadata[artifact.CHECKSUM]
    (timed,), _ = timing.time_models([loaded], tiny_mlp.inputs, 3)  # and is exported to a timing process
    assert 0 < timed < 0.01


def test_verify_rejects_wrong_outputs(tiny_mlp):
    compiled = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target)
    wrong = (tiny_mlp.reference_outputs[0] * 1.01,)
    with pytest.raises(VerificationError, match="differs"):
        compiler.verify(compiled, tiny_mlp.inputs, wrong)
    with pytest.raises(VerificationError, match="shape"):
        compiler.verify(compiled, tiny_mlp.inputs, (wrong[0][:, :3],))


def test_a_mismatch_the_untuned_model_shares_is_put_down_to_the_import(tiny_mlp, mistranslated_model, host_target):
    from tvm.s_tir import meta_schedule as ms

    model = tasks.extract(mistranslated_model, host_target)
    for database in (None, ms.database.MemoryDatabase()):
        with pytest.raises(ImportMismatchError, match="before any tuning.*output 0 differs from the reference"):
            compiler.compile_checked(model, database)


def test_load_rejects_non_artifacts(tmp_path):
    with pytest.raises(InputError, match="not a tunewise artifact"):
        compiler.load(str(tmp_path))


def test_build_candidate_is_a_drop_in_for_the_stock_builder(tiny_mlp):
    """LocalBuilder(f_build=build_candidate) builds for real: the fix the stock-loop benchmark relies on."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise.tuning.build import build_candidate

    builder = ms.builder.LocalBuilder(f_build=build_candidate, max_workers=1)
    (result,) = builder.build([ms.builder.BuilderInput(tiny_mlp.task_mods[0], tiny_mlp.target)])
    assert result.error_msg is None and result.artifact_path.endswith(".tar")


@pytest.fixture(scope="module")
def tiny_gpt_artifact(host_target, tmp_path_factory):
    """tiny-gpt compiled untuned, saved with its metadata and loaded back; with its example ids and outputs."""
    model = tasks.extract(frontend.load("tiny-gpt"), host_target)
    metadata = compiler.io_metadata(model.inputs, model.reference_outputs, model.mod)
    path = compiler.CompiledModel(compiler.build(model), host_target, metadata).save(
        str(tmp_path_factory.mktemp("gpt") / "artifact"))
    return compiler.load(path), model.inputs[0], model.reference_outputs[0]


def test_the_metadata_records_which_inputs_index_a_table(tiny_gpt_artifact):
    loaded, _, _ = tiny_gpt_artifact
    assert loaded.metadata["inputs"] == [{"name": "ids", "shape": [1, 8], "dtype": "int64", "index_range": [0, 64]}]


@pytest.mark.parametrize("bad", [64, -1, 100_000_000])
def test_out_of_range_token_ids_raise_before_reaching_the_kernels(tiny_gpt_artifact, bad):
    loaded, ids, reference = tiny_gpt_artifact
    wrong = ids.copy()
    wrong[0, 3] = bad
    with pytest.raises(ModelInputError, match=rf"^input 'ids' holds index {bad} at \(0, 3\); its values must lie "
                                              r"in \[0, 64\)"):
        loaded(wrong)
    np.testing.assert_allclose(loaded(ids)[0], reference, rtol=1e-4, atol=1e-5)


def test_inputs_of_the_wrong_number_shape_or_kind_are_named(tiny_gpt_artifact):
    loaded, ids, _ = tiny_gpt_artifact
    with pytest.raises(ModelInputError, match=r"^input 'ids' must have shape \(1, 8\), got \(1, 9\)$"):
        loaded(np.zeros((1, 9), dtype=np.int64))
    with pytest.raises(ModelInputError, match=r"^input 'ids' must be int64, got float32$"):
        loaded(ids.astype(np.float32))
    with pytest.raises(ModelInputError, match=r"^the model takes 1 input\(s\) \('ids'\), got 2$"):
        loaded(ids, ids)
    with pytest.raises(ModelInputError, match=r"^input 'ids' holds values that int32, which the model takes"):
        compiler.CompiledModel(loaded.executable, loaded.target, {"inputs": [
            {**loaded.metadata["inputs"][0], "dtype": "int32"}]})(ids + 2**40)


def test_float64_and_narrower_ints_are_converted_where_no_value_changes(tiny_mlp, tiny_gpt_artifact):
    compiled = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target,
                                      compiler.io_metadata(tiny_mlp.inputs, tiny_mlp.reference_outputs, tiny_mlp.mod))
    x = tiny_mlp.inputs[0]
    np.testing.assert_array_equal(compiled(x.astype(np.float64))[0], compiled(x)[0])  # numpy's default dtype
    assert compiled.time(x.astype(np.float64), repeat=1, min_repeat_ms=0).repeats == 1
    with pytest.raises(ModelInputError, match=r"^input 'x' holds values beyond the range of float32"):
        compiled(np.full(x.shape, 1e300))
    loaded, ids, reference = tiny_gpt_artifact
    np.testing.assert_allclose(loaded(ids.astype(np.int32))[0], reference, rtol=1e-4, atol=1e-5)


class _Seen:
    """Wraps a compiled model's VM call, keeping the arguments it got and the tensors it returned."""

    def __init__(self, compiled):
        self.run, self.arguments, self.outputs = compiled._run, [], []
        compiled._run = self

    def __call__(self, arguments):
        self.arguments, self.outputs = arguments, self.run(arguments)
        return self.outputs


@pytest.fixture(scope="module")
def mlp_artifact(tiny_mlp, tmp_path_factory):
    """tiny-mlp compiled untuned, saved with its metadata and loaded back."""
    path = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target, compiler.io_metadata(
        tiny_mlp.inputs, tiny_mlp.reference_outputs, tiny_mlp.mod)).save(str(tmp_path_factory.mktemp("mlp") / "a"))
    return compiler.load(path)


def test_numpy_arrays_in_give_numpy_arrays_out_sharing_the_vms_memory(tiny_mlp, mlp_artifact):
    seen, x = _Seen(mlp_artifact), tiny_mlp.inputs[0]
    aligned = np.empty(x.size + 16, dtype=x.dtype)
    start = (-aligned.ctypes.data % compiler.ALIGNMENT) // x.itemsize
    aligned = aligned[start:start + x.size].reshape(x.shape)
    aligned[...] = x
    (y,) = mlp_artifact(aligned)
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, tiny_mlp.reference_outputs[0], rtol=1e-5, atol=1e-5)
    assert seen.arguments[0].data_ptr() == aligned.ctypes.data  # read in place
    assert y.ctypes.data == seen.outputs[0].data_ptr()  # the VM's output itself
    kept = y.copy()
    mlp_artifact(aligned * 2)
    np.testing.assert_array_equal(y, kept)  # a later call writes elsewhere
    misaligned = np.empty(x.size + 1, dtype=x.dtype)[1:].reshape(x.shape)
    misaligned[...] = x
    np.testing.assert_array_equal(mlp_artifact(misaligned)[0], kept)  # copied first: TVM's kernels assume alignment
    assert seen.arguments[0].data_ptr() != misaligned.ctypes.data
    read_only = aligned.copy()
    read_only.flags.writeable = False
    np.testing.assert_array_equal(mlp_artifact(read_only)[0], kept)


def test_torch_tensors_in_give_torch_tensors_out_through_dlpack_without_copies(tiny_mlp, mlp_artifact):
    import torch

    seen = _Seen(mlp_artifact)
    x = torch.from_numpy(tiny_mlp.inputs[0]).clone()  # torch allocates aligned to 64 bytes
    assert x.data_ptr() % compiler.ALIGNMENT == 0
    (y,) = mlp_artifact(x)
    assert isinstance(y, torch.Tensor) and y.device.type == "cpu"
    torch.testing.assert_close(y, torch.from_numpy(tiny_mlp.reference_outputs[0]), rtol=1e-5, atol=1e-5)
    assert seen.arguments[0].data_ptr() == x.data_ptr()
    assert y.data_ptr() == seen.outputs[0].data_ptr()
    wide = torch.zeros(x.shape[0], x.shape[1] + 1)
    wide[:, 1:] = x
    strided = wide[:, 1:]  # neither contiguous nor aligned: copied
    torch.testing.assert_close(mlp_artifact(strided)[0], y)
    torch.testing.assert_close(mlp_artifact(x.double())[0], y)  # float64 converted, as for numpy
    grad = x.clone().requires_grad_()
    torch.testing.assert_close(mlp_artifact(grad)[0], y)
    with pytest.raises(ModelInputError, match=r"^input 'x' must have shape \(1, 64\), got \(2, 64\)$"):
        mlp_artifact(torch.zeros(2, 64))
    with pytest.raises(ModelInputError, match="input 0 is bfloat16"):
        mlp_artifact(x.bfloat16())


@pytest.mark.gpu
def test_cuda_tensors_in_give_cuda_tensors_out_without_copies(gpu_target):
    import torch

    model = tasks.extract(frontend.load("tiny-mlp"), gpu_target)
    compiled = compiler.CompiledModel(compiler.build(model), gpu_target,
                                      compiler.io_metadata(model.inputs, model.reference_outputs, model.mod))
    seen = _Seen(compiled)
    x = torch.from_numpy(model.inputs[0]).cuda()
    (y,) = compiled(x)
    assert y.device == x.device
    torch.testing.assert_close(y.cpu(), torch.from_numpy(model.reference_outputs[0]), rtol=1e-4, atol=1e-4)
    assert seen.arguments[0].data_ptr() == x.data_ptr() and y.data_ptr() == seen.outputs[0].data_ptr()
    with pytest.raises(ModelInputError, match="input 0 is cpu"):
        compiled(x.cpu())
    np.testing.assert_allclose(compiled(model.inputs[0])[0], model.reference_outputs[0], rtol=1e-4, atol=1e-4)


def test_accuracy_is_stated_on_the_further_samples_and_a_classifier_s_arg_max_compared(tiny_mlp):
    compiled = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target)
    stated = compiler.accuracy(compiled, tiny_mlp)
    assert stated["samples"] == 1 + frontend.SAMPLES and stated["max_relative_error"] < 1e-5
    assert stated["argmax_agreement"] == 1.0  # 16 classes
    (inputs, outputs), *_ = tiny_mlp.samples
    off = dataclasses.replace(tiny_mlp, samples=((inputs, (outputs[0] * 1.5,)),))
    with pytest.raises(VerificationError, match="differs"):
        compiler.accuracy(compiled, off)


def test_an_arg_max_that_moves_within_the_tolerance_counts_against_the_agreement(tiny_mlp):
    """Outputs within bfloat16's tolerance of the reference but with another arg-max: the rows are counted."""
    near = np.array([[1.0, 0.99] + [0.0] * 10], np.float32)
    swapped = near[:, [1, 0, *range(2, 12)]]
    x = tiny_mlp.inputs
    model = dataclasses.replace(tiny_mlp, precision="bfloat16", reference_outputs=(near,),
                                samples=((x, (near,)), (x, (swapped,)), (x, (near[:, :9],))))
    with pytest.raises(VerificationError, match="shape"):
        compiler.accuracy(lambda *inputs: [near], model)
    stated = compiler.accuracy(lambda *inputs: [near], dataclasses.replace(model, samples=model.samples[:2]))
    assert stated == {"samples": 3, "max_relative_error": pytest.approx(0.01), "argmax_agreement": 2 / 3}
