"""End-to-end latencies of a tuned model and of its references, timed side by side in two fresh processes.

The compiled models (the tuned one, the fastest one a whole-model check measured, on request the untuned one)
are exported and loaded in one fresh process, and the references (PyTorch eager, onnxruntime, OpenVINO where
installed) in another that never imports TVM; the two take turns, a round of every compiled model, then a round
of every reference (:func:`time_side_by_side`). A round is the mean call time over at least :data:`ROUND_MS`
milliseconds after a warm-up call, and a latency the median over :data:`ROUNDS` rounds (fewer when asked, or down
to :data:`MIN_ROUNDS` when the rounds would last over :data:`MAX_SECONDS`); :func:`describe` says how.
:attr:`SideBySide.ratios` is the median over rounds of a model's time over a reference's in the same round,
which holds where the machine's speed does not (evidence: bench/studies/checks/findings.md).

The references are rebuilt in the fresh process from what needs no user code (a zoo model, a ``.pt2``
program, an ``.onnx`` file, a pickled ``torch.nn.Module``), eagerly and in onnxruntime where they can be, and
with ``torch.compile`` on request (:attr:`References.torch_compile`). A reference that cannot be run is
``None`` and the ``tunewise.delivery.timing`` logger says why; the compiled models are timed still.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

from tunewise.errors import message_line

ROUNDS = 10
MIN_ROUNDS = 3
ROUND_MS = 100
MAX_SECONDS = 30.0

REFERENCES = {"torch_eager": "PyTorch eager", "onnxruntime": "onnxruntime", "openvino": "OpenVINO",
              "openvino_f32": "OpenVINO f32", "cuda_graph": "CUDA graph (1 stream)", "aot": "tunewise.runtime.aot"}
CPU_REFERENCES = ("torch_eager", "onnxruntime")
OPENVINO_REFERENCES = ("openvino", "openvino_f32")
"""OpenVINO in its default precision (``bfloat16`` on a CPU with AMX or AVX512-BF16, else ``f32``) and in ``f32``,
both on the model's ONNX form with ``PERFORMANCE_HINT`` ``LATENCY``: timed beside the CPU references where the
``openvino`` package is installed (:func:`cpu_references`)."""
GPU_REFERENCES = ("torch_eager", "cuda_graph", "aot")
COMPILED_REFERENCES = ("torch_compile", "torch_compile_seconds")

_log = logging.getLogger(__name__)


def describe(rounds: int = ROUNDS, *, references: bool = True, models: tuple[str, ...] = ("tuned",)) -> str:
    """How latencies timed with ``rounds`` rounds of the compiled ``models`` (their names, in the order they
    were timed in each round; and the references, if they were timed) were timed."""
    return (f"in fresh processes, median of {rounds} rounds of >= {ROUND_MS} ms"
            + (f"; {' and '.join(models)} alternating" if len(models) > 1 else "")
            + ("; the references in a process of their own, in turn with them" if references else ""))


def rounds_for(call_seconds: float, asked: int = ROUNDS) -> int:
    """Rounds of the compiled models when one call of the slower takes ``call_seconds``: ``asked`` at most,
    fewer (:data:`MIN_ROUNDS` at least, unless fewer are asked) where they would last over :data:`MAX_SECONDS`."""
    per_round = 2 * max(call_seconds, ROUND_MS / 1e3)  # a round of each model
    return min(asked, max(MIN_ROUNDS, min(ROUNDS, int(MAX_SECONDS // per_round))))


def relation(latency: float, baseline: float, name: str | None = None) -> str:
    """``"1.8x faster than NAME"`` or ``"1.3x slower than NAME"`` (without ``name``: ``"1.8x faster"``):
    ``latency`` against ``baseline``."""
    than = f" than {name}" if name else ""
    if latency <= baseline:
        return f"{baseline / latency:.1f}x faster{than}"
    return f"{latency / baseline:.1f}x slower{than}"


@dataclass(frozen=True)
class References:
    """The references to time beside the compiled models: those of ``source`` (a zoo name, a ``.pt2`` or
    ``.onnx`` path, or a ``torch.nn.Module`` with its ``example_inputs``; ``seed``: a zoo model's weights),
    and with ``torch_compile`` (on a CPU) also its ``torch.compile`` model, timed after the rounds."""

    source: object
    example_inputs: object = None
    seed: int = 0
    torch_compile: bool = False


@dataclass(frozen=True)
class SideBySide:
    """What :func:`time_side_by_side` timed (seconds): each compiled model's median ``latencies``, in the order
    given, over ``rounds`` rounds; the ``references`` by their :data:`REFERENCES` names (``None``: not
    timed), with ``"torch_compile"`` and ``"torch_compile_seconds"`` (its first call's wall time) where asked
    for; and per compiled model, its ``ratios`` to each reference timed: the median over the rounds of its
    time over the reference's in the same round (:meth:`ratio`: the same between two compiled models)."""

    latencies: list[float]
    rounds: int
    references: dict[str, float | None] = field(default_factory=dict)
    ratios: list[dict[str, float]] = field(default_factory=list)
    samples: list[list[float]] = field(default_factory=list)  # per compiled model, its latency in each round

    def ratio(self, model: int, other: int) -> float:
        """The median over the rounds of compiled model ``model``'s time over model ``other``'s in the same
        round (indices in the order given)."""
        return _median_ratio(self.samples[model], self.samples[other])


def _median_ratio(mine, theirs) -> float:
    """The median over the rounds of ``mine`` over ``theirs`` (two latencies in each round, in round order)."""
    return statistics.median(a / b for a, b in zip(mine, theirs, strict=True))


def time_models(models, inputs, rounds: int = ROUNDS) -> tuple[list[float], int]:
    """Median latencies (seconds) of :class:`~tunewise.delivery.compile.CompiledModel` objects (one target) on
    ``inputs``, timed in turn, round after round, in one fresh process, and the number of rounds
    (:func:`rounds_for`, ``rounds`` at most): :func:`time_side_by_side` without references."""
    timed = time_side_by_side(models, inputs, rounds)
    return timed.latencies, timed.rounds


def time_side_by_side(models, inputs, rounds: int = ROUNDS, *, references: References | None = None) -> SideBySide:
    """:class:`~tunewise.delivery.compile.CompiledModel` objects (one target) timed on ``inputs`` in turn, round after
    round, in one fresh process (a :mod:`tunewise.tuning.workers` process, forked for it and ended after it), each
    round followed by a round of each of ``references`` in a fresh process that does not import TVM (on the
    models' device: PyTorch eager and onnxruntime on a CPU, :data:`GPU_REFERENCES` on a GPU). The rounds are
    :func:`rounds_for` the slowest model's warm-up call, ``rounds`` at most."""
    from tunewise.target import is_gpu
    from tunewise.tuning import workers

    kind = "gpu-references" if is_gpu(models[0].target) else "references"
    with tempfile.TemporaryDirectory(prefix="tunewise-timing-") as directory:
        others = None if references is None else _ReferenceProcess(kind, references, inputs, directory)
        libraries = []
        for i, model in enumerate(models):
            libraries.append(os.path.join(directory, f"model{i}.so"))
            model.export_library(libraries[-1])
        pool = workers.WorkerPool(1)
        ours, theirs = [], []
        try:
            slowest = _tvm_result(pool, _load_tvm, libraries, str(models[0].target), list(inputs))
            count = rounds_for(slowest, rounds)
            if others is not None:
                others.start()
            for _ in range(count):
                ours.append(_tvm_result(pool, _tvm_round))
                if others is not None:
                    theirs.append(others.round())
        except BaseException:
            if others is not None:
                others.kill()
            raise
        finally:
            pool.shutdown()
        timed = {} if others is None else others.close(_names(kind, references))
    samples = [list(timed_model) for timed_model in zip(*ours, strict=True)]
    return SideBySide([statistics.median(s) for s in samples], count, timed,
                      [_ratios(s, theirs) for s in samples], samples)


def _ratios(mine: list[float], theirs: list[dict[str, float]]) -> dict[str, float]:
    """Per reference timed in every round (``theirs``: a round's latencies by name), the median over the
    rounds of ``mine`` (a model's latency in each round) over the reference's."""
    names = set.intersection(*(set(round_) for round_ in theirs)) if theirs else set()
    return {name: _median_ratio(mine, [round_[name] for round_ in theirs]) for name in sorted(names)}


def _tvm_result(pool, job, *args):
    """The result of ``job(*args)`` in the TVM timing process of ``pool``; a one-line ``RuntimeError`` when
    it fails."""
    try:
        return pool.submit(job, *args).result()
    except Exception as err:  # noqa: BLE001 (the process's error, its traceback in the text)
        raise RuntimeError(f"the timing process failed: {message_line(err, last=True)}") from None


def _openvino_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("openvino") is not None


def cpu_references() -> tuple[str, ...]:
    """The names of the references timed on a CPU: :data:`CPU_REFERENCES`, and :data:`OPENVINO_REFERENCES` where
    ``openvino`` is installed."""
    return CPU_REFERENCES + (OPENVINO_REFERENCES if _openvino_installed() else ())


def _names(kind: str, references: References) -> tuple[str, ...]:
    """The names a reference process of ``kind`` answers with for ``references``."""
    names = GPU_REFERENCES if kind == "gpu-references" else cpu_references()
    return names + (COMPILED_REFERENCES if references.torch_compile and kind == "references" else ())


def time_references(source, inputs, *, example_inputs=None, seed: int = 0) -> tuple[float | None, float | None]:
    """``(PyTorch eager, onnxruntime)`` median latencies (seconds) of ``source`` on ``inputs`` (numpy arrays),
    timed in a fresh process that does not import TVM; ``None`` for what cannot be run."""
    timed = reference_latencies(source, inputs, example_inputs=example_inputs, seed=seed)
    return timed["torch_eager"], timed["onnxruntime"]


def reference_latencies(source, inputs, *, example_inputs=None, seed: int = 0,
                        torch_compile: bool = False) -> dict[str, float | None]:
    """The median latencies (seconds) of ``source`` on ``inputs`` (numpy arrays) by :func:`cpu_references`
    names (PyTorch eager, onnxruntime, OpenVINO where installed), timed in turn, :data:`ROUNDS` rounds, in a fresh
    process that does not import TVM; with ``torch_compile``, also ``"torch_compile"``: the PyTorch model compiled by
    ``torch.compile`` (inductor, its default mode), timed after a first call that compiles it, and
    ``"torch_compile_seconds"``, that first call's wall time (with an empty inductor cache: the whole compilation,
    whatever was compiled before). ``None`` for what cannot be run (an ``.onnx`` file has no PyTorch model to run or
    compile)."""
    references = References(source, example_inputs, seed, torch_compile)
    return _references_alone("references", references, inputs)


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
    return _references_alone("gpu-references", References(source, example_inputs, seed), inputs)


def _references_alone(kind: str, references: References, inputs) -> dict[str, float | None]:
    """The latencies of ``references`` that a fresh process of ``kind`` times in :data:`ROUNDS` rounds."""
    with tempfile.TemporaryDirectory(prefix="tunewise-timing-") as directory:
        others = _ReferenceProcess(kind, references, inputs, directory)
        others.start()
        for _ in range(ROUNDS):
            others.round()
        return others.close(_names(kind, references))


class _ReferenceProcess:
    """The fresh process that times the references of ``references`` on ``inputs``, of ``kind``
    (``"references"``: on the CPU; ``"gpu-references"``: on GPU 0), its files in ``directory``. It starts
    preparing them at once; :meth:`start` waits until they are ready, :meth:`round` times a round of each,
    :meth:`close` ends it with their median latencies. When it fails, the rounds time nothing and every
    latency is ``None``; the ``tunewise.delivery.timing`` logger says why."""

    def __init__(self, kind: str, references: References, inputs, directory: str):
        self._rounds, self._skipped = [], []
        spec = _reference_spec(references.source, references.example_inputs, references.seed, directory)
        np.savez(os.path.join(directory, "inputs.npz"), *inputs)
        spec.update(kind=kind, inputs=os.path.join(directory, "inputs.npz"), torch_compile=references.torch_compile)
        path = os.path.join(directory, "spec.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        self._stderr = open(os.path.join(directory, "stderr.txt"), "w+")  # noqa: SIM115 (read when it fails)
        search_path = os.pathsep.join(p for p in sys.path if p)  # what this process can import, the other can
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tunewise.delivery.timing", path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": search_path})

    def _ask(self, request: str) -> dict | None:
        """The process's answer to ``request``; ``None`` (and it is ended) when it failed."""
        if self._proc is None:
            return None
        try:
            self._proc.stdin.write(request + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except OSError:
            line = ""
        if line.strip():
            return json.loads(line)
        code, last_line = self._end()  # its standard output closed: it is ending, or stuck
        self._skipped.append(f"the references were not timed: their process failed (exit code {code}): {last_line}")
        return None

    def _end(self, *, at_once: bool = False) -> tuple[int, str]:
        """End the process (``at_once``: killed; else left 10 s to exit, then killed): its exit code and the
        last line of its standard error."""
        if at_once:
            self._proc.kill()
        with contextlib.suppress(OSError):  # a process that died has broken the pipe
            self._proc.stdin.close()
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        self._stderr.seek(0)
        last_line = (self._stderr.read().strip().splitlines() or [""])[-1]
        self._stderr.close()
        self._proc = None
        return code, last_line

    def start(self) -> None:
        answer = self._ask("start")
        if answer is not None:
            self._skipped += answer["skipped"]

    def round(self) -> dict[str, float]:
        """A round of each reference: seconds a call, by name (empty once the process failed)."""
        answer = self._ask("round") or {}
        if answer:
            self._rounds.append(answer)
        return answer

    def kill(self) -> None:
        """End the process at once."""
        if self._proc is not None:
            self._end(at_once=True)

    def close(self, names: tuple[str, ...]) -> dict[str, float | None]:
        """The median latency of each of ``names`` (``None``: not timed), and what the process timed after
        the rounds; the process ended."""
        after = self._ask("end") or {}
        if self._proc is not None:
            self._end()
        for reason in self._skipped + after.pop("skipped", []):
            _log.info("%s", reason)
        timed = dict.fromkeys(names)
        for name in self._rounds[0] if self._rounds else ():
            timed[name] = statistics.median(round_[name] for round_ in self._rounds)
        timed.update({name: after.get(name) for name in names if name in after})
        return timed


def _reference_spec(source, example_inputs, seed: int, directory: str) -> dict:
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
    return spec


# the TVM timing process's models, loaded by _load_tvm: their evaluators and their arguments
_loaded: dict = {}


def _load_tvm(libraries: list[str], target: str, inputs: list[np.ndarray]) -> float:
    """In the TVM timing process: load the exported ``libraries`` for ``target`` (its JSON) with ``inputs`` as
    their arguments, run each once, and return the slowest of those calls' seconds."""
    import tvm
    from tvm import relax

    from tunewise.target import check_runnable
    from tunewise.tuning import tvm_env

    target = tvm.target.Target(json.loads(target))
    device = tvm.cuda(0) if target.kind.name == "cuda" else tvm.cpu(0)
    check_runnable(target)
    tvm_env.use_target_threads(target)
    evaluators, args, slowest = [], [tvm.runtime.tensor(x, device) for x in inputs], 0.0
    for library in libraries:
        vm = relax.VirtualMachine(tvm.runtime.load_module(library), device)
        evaluators.append(vm.time_evaluator("main", device, number=1, repeat=1, min_repeat_ms=ROUND_MS))
        start = time.perf_counter()
        vm["main"](*args)  # warm-up
        device.sync()
        slowest = max(slowest, time.perf_counter() - start)
    _loaded.update(evaluators=evaluators, args=args)
    return slowest


def _tvm_round() -> list[float]:
    """In the TVM timing process: a round of each model :func:`_load_tvm` loaded, in turn (seconds a call)."""
    return [float(evaluator(*_loaded["args"]).mean) for evaluator in _loaded["evaluators"]]


def _round_time(call, sync=lambda: None) -> float:
    """The mean time of ``call()`` over a round of at least :data:`ROUND_MS` milliseconds, after an untimed
    call: a round follows the other process's, which left the caches to its own model, and a compiled model's
    round (TVM's time evaluator) likewise leaves its first call out."""
    call()
    sync()
    count, start = 0, time.perf_counter()
    while True:
        call()
        count += 1
        sync()
        elapsed = time.perf_counter() - start
        if elapsed * 1e3 >= ROUND_MS:
            return elapsed / count


def _median_round_time(call, sync=lambda: None) -> float:
    """Median over :data:`ROUNDS` rounds of ``call()`` (:func:`_round_time`)."""
    return statistics.median(_round_time(call, sync) for _ in range(ROUNDS))


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


def _gpu_reference_calls(spec: dict, inputs: list[np.ndarray], skipped: list[str]) -> dict:
    """The GPU references of ``spec`` as ``{name: (call, sync)}``, each called once."""
    import torch

    from tunewise.runtime import aot, cuda_graph

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = _reference_model(spec, skipped)
    if model is None:
        skipped.append("no PyTorch model to run on the GPU")
        return {}
    model = model.cuda().eval()
    tensors = tuple(torch.from_numpy(x).cuda() for x in inputs)

    def eager():
        with torch.no_grad():
            model(*tensors)

    calls = {"torch_eager": eager}
    runners = {"cuda_graph": lambda: cuda_graph.single_stream(model, tensors), "aot": lambda: aot(model, tensors)}
    for name, make in runners.items():
        try:
            run = make()
        except Exception as err:  # capture and export raise many types
            skipped.append(f"no {name} reference: {type(err).__name__}: {message_line(err)}")
            continue
        calls[name] = lambda run=run: run(*tensors)
    return {name: (call, torch.cuda.synchronize) for name, call in calls.items()}


def _cpu_reference_calls(spec: dict, inputs: list[np.ndarray], skipped: list[str]) -> tuple[dict, object, tuple]:
    """The CPU references of ``spec`` as ``{name: (call, sync)}``, the PyTorch model (``None``: none) and its
    input tensors."""
    import torch

    calls = {}
    tensors = tuple(torch.from_numpy(x) for x in inputs)
    model, onnx_path = _reference_model(spec, skipped), spec.get("onnx")
    if model is not None:
        def eager():
            with torch.no_grad():
                model(*tensors)

        calls["torch_eager"] = (eager, lambda: None)
    if onnx_path is None and model is not None:
        onnx_path = os.path.join(os.path.dirname(spec["inputs"]), "reference.onnx")
        try:  # with grad mode on: under no_grad, nn.TransformerEncoderLayer takes a fused path it cannot export
            torch.onnx.export(model, tensors, onnx_path, dynamo=False)
        except Exception as err:  # the exporter raises many types
            skipped.append(f"no onnxruntime reference: ONNX export failed: {err}")
            onnx_path = None
    if onnx_path is not None:
        import onnxruntime

        session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs, strict=True)}
        calls["onnxruntime"] = (lambda: session.run(None, feeds), lambda: None)
        if _openvino_installed():
            calls.update(_openvino_calls(onnx_path, inputs, skipped))
    return calls, model, tensors


def _openvino_calls(onnx_path: str, inputs: list[np.ndarray], skipped: list[str]) -> dict:
    """:data:`OPENVINO_REFERENCES` of the ONNX model at ``onnx_path`` as ``{name: (call, sync)}``; none where
    OpenVINO cannot compile it (``skipped`` says why)."""
    import openvino

    core, feeds, calls = openvino.Core(), dict(enumerate(inputs)), {}
    for name, hint in (("openvino", None), ("openvino_f32", "f32")):
        config = {"PERFORMANCE_HINT": "LATENCY"} | ({"INFERENCE_PRECISION_HINT": hint} if hint else {})
        try:
            request = core.compile_model(onnx_path, "CPU", config).create_infer_request()
        except Exception as err:  # OpenVINO raises RuntimeError and its own types
            skipped.append(f"no {REFERENCES[name]} reference: {message_line(err, last=True)}")
            continue
        calls[name] = (lambda request=request: request.infer(feeds), lambda: None)
    return calls


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


def _serve(spec_path: str) -> None:
    """The reference process: prepare the references of the spec at ``spec_path``, then answer each line of
    standard input with one line of JSON: ``start`` with what was skipped, once all are ready; ``round`` with
    a round of each (seconds a call, by name); ``end`` with what is timed after the rounds (``torch.compile``)
    and what was skipped, and exit."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the libraries print goes to standard error, not among the answers
    with open(spec_path) as f:
        spec = json.load(f)
    with np.load(spec["inputs"]) as saved:
        inputs = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    skipped: list[str] = []
    if spec["kind"] == "gpu-references":
        calls, model, tensors = _gpu_reference_calls(spec, inputs, skipped), None, ()
    else:
        calls, model, tensors = _cpu_reference_calls(spec, inputs, skipped)
    for call, sync in calls.values():  # warm-up
        call()
        sync()
    for request in sys.stdin:
        if request.strip() == "start":
            answer = {"skipped": skipped}
        elif request.strip() == "round":
            answer = {name: _round_time(call, sync) for name, (call, sync) in calls.items()}
        else:
            answer = {"skipped": []}
            if spec.get("torch_compile"):  # last: inductor may start compile workers, which would share the cores
                answer.update(_time_torch_compile(model, tensors, os.path.dirname(spec["inputs"]), answer["skipped"]))
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
        if request.strip() == "end":
            return


if __name__ == "__main__":
    _serve(sys.argv[1])
    gc.freeze()  # the exit's last collection over TVM's or PyTorch's objects takes a second and frees nothing
