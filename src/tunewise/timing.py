"""End-to-end latencies of a tuned model and of its references, each timed in a fresh process.

A process that has imported TVM, built models and run kernels is a poor place to time anything: TVM's
runtime threads and measuring workers compete for the cores. So the compiled models (the tuned one, the
fastest one a whole-model check measured, on request the untuned one) are exported and timed together in one
fresh process, in alternating rounds with the same settings, and the references (PyTorch eager, onnxruntime)
in another fresh process that never imports TVM.
Every latency is the median over :data:`ROUNDS` rounds of the mean call time in a round of at least
:data:`ROUND_MS` milliseconds, after a warm-up call. The compiled models get fewer rounds when asked (a quicker,
rougher finish), or (at least :data:`MIN_ROUNDS`) when one call of the slower one takes so long that the
rounds would last over :data:`MAX_SECONDS` (an untuned model may take seconds a call). :func:`describe` says
how, in the summary and the metadata.

The references are what is cheap to run without the user's code: a zoo model is rebuilt in eager mode and
exported to ONNX in the fresh process; a ``.pt2`` file's program runs eagerly (``ExportedProgram.module()``)
and, exported to ONNX there, in onnxruntime; an ``.onnx`` file runs in onnxruntime (there is no eager model
to run); a ``torch.nn.Module`` is handed over pickled (run eagerly where its class
can be imported in the fresh process, else as its ``torch.export`` program) and as an ONNX export. On
request (:func:`reference_latencies`), the eager model is also compiled by ``torch.compile`` there and timed
after them. A reference that cannot be run is ``None``, and the ``tunewise.timing`` logger says why.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from tunewise.errors import message_line

ROUNDS = 10
MIN_ROUNDS = 3
ROUND_MS = 100
MAX_SECONDS = 30.0


def describe(rounds: int = ROUNDS, *, references: bool = True, models: tuple[str, ...] = ("tuned",)) -> str:
    """How latencies timed with ``rounds`` rounds of the compiled ``models`` (their names, in the order they
    were timed in each round; and the references, if they were timed) were timed."""
    return (f"in fresh processes, median of {rounds} rounds of >= {ROUND_MS} ms"
            + (f"; {' and '.join(models)} alternating" if len(models) > 1 else "")
            + ("" if rounds == ROUNDS or not references else f"; references: {ROUNDS} rounds"))


def rounds_for(call_seconds: float, asked: int = ROUNDS) -> int:
    """Rounds of the compiled models when one call of the slower takes ``call_seconds``: ``asked`` at most,
    fewer (:data:`MIN_ROUNDS` at least, unless fewer are asked) where they would last over :data:`MAX_SECONDS`."""
    per_round = 2 * max(call_seconds, ROUND_MS / 1e3)  # a round of each model
    return min(asked, max(MIN_ROUNDS, min(ROUNDS, int(MAX_SECONDS // per_round))))

_log = logging.getLogger(__name__)


def relation(latency: float, baseline: float, name: str | None = None) -> str:
    """``"1.8x faster than NAME"`` or ``"1.3x slower than NAME"`` (without ``name``: ``"1.8x faster"``):
    ``latency`` against ``baseline``."""
    than = f" than {name}" if name else ""
    if latency <= baseline:
        return f"{baseline / latency:.1f}x faster{than}"
    return f"{latency / baseline:.1f}x slower{than}"


def _run_worker(spec: dict, directory: str) -> dict:
    path = os.path.join(directory, "spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    search_path = os.pathsep.join(p for p in sys.path if p)  # what this process can import, the other can
    proc = subprocess.run([sys.executable, "-m", "tunewise.timing", path], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": search_path})
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"the timing process failed (exit code {proc.returncode}): "
                           f"{(proc.stderr.strip().splitlines() or [''])[-1]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def time_models(models, inputs, rounds: int = ROUNDS) -> tuple[list[float], int]:
    """Median latencies (seconds) of :class:`~tunewise.compile.CompiledModel` objects (one target) on
    ``inputs``, timed in turn, round after round, in one fresh process (a :mod:`tunewise.workers` process,
    forked for it and ended after it), and the number of rounds (:func:`rounds_for`, ``rounds`` at most)."""
    from tunewise import workers

    with tempfile.TemporaryDirectory(prefix="tunewise-timing-") as directory:
        libraries = []
        for i, model in enumerate(models):
            libraries.append(os.path.join(directory, f"model{i}.so"))
            model.executable.export_library(libraries[-1])
        pool = workers.WorkerPool(1)
        try:
            result = pool.submit(_time_tvm, libraries, str(models[0].target), list(inputs), rounds).result()
        except Exception as err:  # noqa: BLE001 (the process's error, its traceback in the text)
            raise RuntimeError(f"the timing process failed: {message_line(err, last=True)}") from None
        finally:
            pool.shutdown()
    return result


def _reference_spec(source, example_inputs, seed: int, directory: str) -> dict | None:
    """What the reference process runs for ``source``, writing the files it needs to ``directory``."""
    from tunewise import zoo

    if isinstance(source, str):
        if source in zoo.MODELS:
            return {"zoo": source, "seed": seed}
        return {"pt2": source} if source.endswith(".pt2") else {"onnx": source}
    import torch

    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    spec: dict = {"module": os.path.join(directory, "module.pt")}
    torch.save(source, spec["module"])  # loaded there if its class can be imported there
    try:
        spec["pt2"] = os.path.join(directory, "model.pt2")
        torch.export.save(torch.export.export(source.eval(), inputs), spec["pt2"])
    except Exception as err:  # torch.export raises many types
        _log.info("no PyTorch eager reference: torch.export failed: %s", err)
        spec.pop("pt2")
    try:  # with grad mode on: under no_grad, nn.TransformerEncoderLayer takes a fused path it cannot export
        spec["onnx"] = os.path.join(directory, "model.onnx")
        torch.onnx.export(source.eval(), inputs, spec["onnx"], dynamo=False)
    except Exception as err:  # the exporter raises many types
        _log.info("no onnxruntime reference: ONNX export failed: %s", err)
        spec.pop("onnx")
    return spec or None


def time_references(source, inputs, *, example_inputs=None, seed: int = 0) -> tuple[float | None, float | None]:
    """``(PyTorch eager, onnxruntime)`` median latencies (seconds) of ``source`` on ``inputs`` (numpy arrays),
    timed in a fresh process that does not import TVM; ``None`` for what cannot be run."""
    timed = reference_latencies(source, inputs, example_inputs=example_inputs, seed=seed)
    return timed["torch_eager"], timed["onnxruntime"]


CPU_REFERENCES = ("torch_eager", "onnxruntime")
COMPILED_REFERENCES = ("torch_compile", "torch_compile_seconds")


def reference_latencies(source, inputs, *, example_inputs=None, seed: int = 0,
                        torch_compile: bool = False) -> dict[str, float | None]:
    """The median latencies (seconds) of ``source`` on ``inputs`` (numpy arrays) by :data:`CPU_REFERENCES`
    names (PyTorch eager, onnxruntime), timed one after the other in a fresh process that does not import TVM;
    with ``torch_compile``, also ``"torch_compile"``: the PyTorch model compiled by ``torch.compile``
    (inductor, its default mode), timed after a first call that compiles it, and ``"torch_compile_seconds"``,
    that first call's wall time (with an empty inductor cache: the whole compilation, whatever was compiled
    before). ``None`` for what cannot be run (an ``.onnx`` file has no PyTorch model to run or compile)."""
    names = CPU_REFERENCES + (COMPILED_REFERENCES if torch_compile else ())
    return _timed_references("references", names, source, inputs, example_inputs, seed, torch_compile=torch_compile)


def _timed_references(kind: str, names: tuple[str, ...], source, inputs, example_inputs, seed: int,
                      **options) -> dict[str, float | None]:
    """The latencies ``names`` of ``source`` that a fresh process running the references of ``kind`` times
    (``"references"``: on the CPU; ``"gpu-references"``: on GPU 0), with ``options`` in its spec; ``None``
    for what it could not run, and the ``tunewise.timing`` logger says why."""
    with tempfile.TemporaryDirectory(prefix="tunewise-timing-") as directory:
        spec = _reference_spec(source, example_inputs, seed, directory)
        if spec is None:
            return dict.fromkeys(names)
        np.savez(os.path.join(directory, "inputs.npz"), *inputs)
        result = _run_worker({"kind": kind, **spec, "inputs": os.path.join(directory, "inputs.npz"), **options},
                             directory)
    for reason in result["skipped"]:
        _log.info("%s", reason)
    return {name: result.get(name) for name in names}


def _median_round_time(call, sync=lambda: None) -> float:
    """Median over :data:`ROUNDS` rounds of the mean time of ``call()`` in a round of >= :data:`ROUND_MS`."""
    call()
    sync()
    means = []
    for _ in range(ROUNDS):
        count, start = 0, time.perf_counter()
        while True:
            call()
            count += 1
            sync()
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= ROUND_MS:
                break
        means.append(elapsed / count)
    return statistics.median(means)


def _time_tvm(libraries: list[str], target: str, inputs: list[np.ndarray], rounds: int) -> tuple[list[float], int]:
    """:func:`time_models` in its process: the exported ``libraries`` for ``target`` (its JSON)."""
    import tvm
    from tvm import relax

    from tunewise import tvm_env

    target = tvm.target.Target(json.loads(target))
    device = tvm.cuda(0) if target.kind.name == "cuda" else tvm.cpu(0)
    tvm_env.use_target_threads(target)
    evaluators, args, slowest = [], [tvm.runtime.tensor(x, device) for x in inputs], 0.0
    for library in libraries:
        vm = relax.VirtualMachine(tvm.runtime.load_module(library), device)
        evaluators.append(vm.time_evaluator("main", device, number=1, repeat=1, min_repeat_ms=ROUND_MS))
        start = time.perf_counter()
        vm["main"](*args)  # warm-up
        device.sync()
        slowest = max(slowest, time.perf_counter() - start)
    samples: list[list[float]] = [[] for _ in evaluators]
    for _ in range(rounds_for(slowest, rounds)):
        for timed, evaluator in zip(samples, evaluators, strict=True):
            timed.append(float(evaluator(*args).mean))
    return [statistics.median(timed) for timed in samples], len(samples[0])


REFERENCES = {"torch_eager": "PyTorch eager", "onnxruntime": "onnxruntime",
              "cuda_graph": "CUDA graph (1 stream)", "aot": "tunewise.runtime.aot"}
GPU_REFERENCES = ("torch_eager", "cuda_graph", "aot")


def time_references_on(target, source, inputs, *, example_inputs=None, seed: int = 0) -> dict[str, float | None]:
    """The references of a model tuned for ``target``, by their :data:`REFERENCES` names: on a CPU, PyTorch
    eager and onnxruntime (:func:`reference_latencies`); on a GPU, PyTorch eager, its single-stream CUDA graph
    and Nimble's engine on that GPU (:func:`time_gpu_references`). Every name is there, ``None`` where not
    timed."""
    from tunewise.target import is_gpu

    timed = dict.fromkeys(REFERENCES)
    if is_gpu(target):
        timed.update(time_gpu_references(source, inputs, example_inputs=example_inputs, seed=seed))
    else:
        timed.update(reference_latencies(source, inputs, example_inputs=example_inputs, seed=seed))
    return timed


def time_gpu_references(source, inputs, *, example_inputs=None, seed: int = 0) -> dict[str, float | None]:
    """Median latencies (seconds) of ``source`` run by PyTorch on GPU 0, timed in a fresh process that does
    not import TVM: ``"torch_eager"`` (eagerly), ``"cuda_graph"`` (captured in one CUDA graph on one stream:
    :func:`tunewise.runtime.cuda_graph.single_stream`) and ``"aot"`` (Nimble's graph over several streams:
    :func:`tunewise.runtime.aot`); ``None`` for what cannot be run (an ``.onnx`` file has no PyTorch model).
    Float32 throughout: TF32 is off, as the tuned kernels compute in float32."""
    return _timed_references("gpu-references", GPU_REFERENCES, source, inputs, example_inputs, seed)


def _reference_model(spec: dict, skipped: list[str]):
    """The PyTorch model of a reference spec, or ``None`` (why is appended to ``skipped``)."""
    import torch

    if "zoo" in spec:
        from tunewise import zoo

        return zoo.get(spec["zoo"], seed=spec["seed"])[0]
    model = None
    if "module" in spec:
        try:
            model = torch.load(spec["module"], weights_only=False)
        except Exception as err:  # unpickling raises many types (a class defined in a script's __main__...)
            skipped.append(f"PyTorch eager runs the torch.export program: the module cannot be loaded in a fresh "
                           f"process: {err}")
    if model is None and "pt2" in spec:
        model = torch.export.load(spec["pt2"]).module()
        model.train = lambda mode=True: model  # the exporter sets eval mode, which a program's module refuses
    return model


def _time_gpu_references(spec: dict, inputs: list[np.ndarray]) -> dict:
    import torch

    from tunewise.runtime import aot, cuda_graph

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    result: dict = {**dict.fromkeys(GPU_REFERENCES), "skipped": []}
    model = _reference_model(spec, result["skipped"])
    if model is None:
        result["skipped"].append("no PyTorch model to run on the GPU")
        return result
    model = model.cuda().eval()
    tensors = tuple(torch.from_numpy(x).cuda() for x in inputs)
    with torch.no_grad():
        result["torch_eager"] = _median_round_time(lambda: model(*tensors), torch.cuda.synchronize)
    runners = {"cuda_graph": lambda: cuda_graph.single_stream(model, tensors), "aot": lambda: aot(model, tensors)}
    for name, make in runners.items():
        try:
            run = make()
        except Exception as err:  # capture and export raise many types
            result["skipped"].append(f"no {name} reference: {type(err).__name__}: {message_line(err)}")
            continue
        result[name] = _median_round_time(lambda run=run: run(*tensors), torch.cuda.synchronize)
    return result


def _time_references(spec: dict, inputs: list[np.ndarray]) -> dict:
    import torch

    result: dict = {"torch_eager": None, "onnxruntime": None, "skipped": []}
    tensors = tuple(torch.from_numpy(x) for x in inputs)
    model, onnx_path = _reference_model(spec, result["skipped"]), spec.get("onnx")
    if model is not None:
        with torch.no_grad():
            result["torch_eager"] = _median_round_time(lambda: model(*tensors))
    if onnx_path is None and model is not None:
        onnx_path = os.path.join(os.path.dirname(spec["inputs"]), "reference.onnx")
        try:  # with grad mode on: under no_grad, nn.TransformerEncoderLayer takes a fused path it cannot export
            torch.onnx.export(model, tensors, onnx_path, dynamo=False)
        except Exception as err:  # the exporter raises many types
            result["skipped"].append(f"no onnxruntime reference: ONNX export failed: {err}")
            onnx_path = None
    if onnx_path is not None:
        import onnxruntime

        session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs, strict=True)}
        result["onnxruntime"] = _median_round_time(lambda: session.run(None, feeds))
    if spec.get("torch_compile"):  # last: inductor may start compile workers, which would share the cores
        result.update(_time_torch_compile(model, tensors, os.path.dirname(spec["inputs"]), result["skipped"]))
    return result


def _time_torch_compile(model, tensors, directory: str, skipped: list[str]) -> dict:
    """``{"torch_compile", "torch_compile_seconds"}`` of ``model`` compiled by ``torch.compile`` (inductor,
    default mode) under ``no_grad``, its caches in ``directory`` (empty: the compilation is not a cache hit)."""
    import torch

    timed = dict.fromkeys(COMPILED_REFERENCES)
    if model is None:
        skipped.append("no torch.compile reference: no PyTorch model to compile")
        return timed
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(directory, "inductor")
    try:
        with torch.no_grad():
            compiled = torch.compile(model)
            start = time.perf_counter()
            compiled(*tensors)
            timed["torch_compile_seconds"] = time.perf_counter() - start
            timed["torch_compile"] = _median_round_time(lambda: compiled(*tensors))
    except Exception as err:  # dynamo and inductor raise many types
        skipped.append(f"no torch.compile reference: {type(err).__name__}: {message_line(err)}")
        return dict.fromkeys(COMPILED_REFERENCES)
    return timed


def _main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    with np.load(spec["inputs"]) as saved:
        inputs = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    if spec["kind"] == "gpu-references":
        result = _time_gpu_references(spec, inputs)
    else:
        result = _time_references(spec, inputs)
    print(json.dumps({**result, "pid": os.getpid()}))


if __name__ == "__main__":
    _main(sys.argv[1])
    gc.freeze()  # the exit's last collection over TVM's or PyTorch's objects takes a second and frees nothing
