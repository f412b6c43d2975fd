"""Compile with the tuned records, check the outputs, save and load self-contained artifacts.

An artifact is a folder holding ``model.so`` (the exported Relax VM executable) and ``metadata.json``
(model, target, ``model.so``'s SHA-256, input and output shapes and dtypes, measured latencies, tuning
summary). Loading needs TVM but neither the model source nor the records; it checks the files first
(:mod:`tunewise.delivery.artifact`).

Only records that beat the task's default schedule are applied: a tuned record slower than the untuned
operator (it happens on tiny operators) is left out, so tuning never makes the model slower.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import weakref
from dataclasses import dataclass

import numpy as np

from tunewise.delivery import artifact, signature
from tunewise.errors import (
    ImportMismatchError,
    InputError,
    ModelInputError,
    TargetError,
    VerificationError,
    message_line,
)
from tunewise.job import logs
from tunewise.target import check_runnable
from tunewise.tuning import kernel_checks, tvm_env

METADATA = artifact.METADATA
LIBRARY = artifact.LIBRARY
FALLBACK_RECORDS = 5
"""Records of a task tried, fastest first, where the compiled model's outputs differ and its untuned model's do
not (:func:`compile_checked`)."""


def record_latency(record) -> float:
    """A tuning record's mean measured seconds (what MetaSchedule ranks records by)."""
    return sum(float(s) for s in record.run_secs) / len(record.run_secs)


def faster_records(model, database, k: int = 1) -> list[list]:
    """Per task of ``model``, its best ``k`` records in ``database`` that beat its default latency, fastest
    first (none where none does)."""
    faster = []
    for task, mod in zip(model.tasks, model.task_mods, strict=True):
        top = database.get_top_k(database.commit_workload(mod), k) if database.has_workload(mod) else []
        faster.append([r for r in top if r.run_secs and record_latency(r) < task.default_latency])
    return faster


def records_database(model, records):
    """A database holding ``records[i]`` for task ``i`` of ``model`` (``None``: nothing for that task)."""
    from tvm.s_tir import meta_schedule as ms

    chosen = ms.database.MemoryDatabase()
    for mod, record in zip(model.task_mods, records, strict=True):
        if record is not None:
            chosen.commit_tuning_record(ms.database.TuningRecord(
                record.trace, chosen.commit_workload(mod), record.run_secs, record.target, record.args_info))
    return chosen


def best_records_database(model, database):
    """A database with, per task, its best record if that beats the task's default latency."""
    return records_database(model, [top[0] if top else None for top in faster_records(model, database)])


def build(model, database=None):
    """Compile an :class:`~tunewise.lowering.tasks.ExtractedModel`; with ``database``, apply its best records."""
    from tvm.s_tir import meta_schedule as ms

    return _build(model, best_records_database(model, database) if database is not None
                  else ms.database.MemoryDatabase())


def _build(model, chosen):
    """Compile ``model`` with the records of ``chosen`` (a MetaSchedule database) as they are."""
    import tvm
    from tvm import relax

    from tunewise.lowering import graph
    from tunewise.tuning import tvm_env

    tvm_env.prepare(model.target.kind.name)
    with model.target, chosen, tvm.transform.PassContext(opt_level=3):
        return relax.build(model.mod, target=model.target,
                           relax_pipeline=graph.compile_pipeline(model.target, model.level))


@dataclass(frozen=True)
class Latency:
    """Latency statistics in seconds over ``repeat`` timed repeats."""

    median: float
    mean: float
    minimum: float
    repeats: int


class CompiledModel:
    """A compiled model on its device: call it with numpy arrays or torch tensors, time it, save it."""

    def __init__(self, executable, target, metadata: dict | None = None, *, library: str | None = None):
        import tvm
        from tvm import relax

        self.executable = executable
        self.library = library  # its shared library's file: loaded from, or exported to (None: not yet)
        self.target = target
        self.metadata = dict(metadata or {})
        self.device = tvm.cuda(0) if target.kind.name == "cuda" else tvm.cpu(0)
        tvm_env.use_target_threads(target)
        self.vm = relax.VirtualMachine(executable, self.device)

    def _to_device(self, inputs) -> list:
        """``inputs`` checked against the metadata (:func:`tunewise.delivery.signature.prepare`) as the VM's
        arguments."""
        if self.device.dlpack_device_type() != _CPU and _holds_torch(inputs):
            return [_tvm_tensor(x, self.device) for x in _device_tensors(self.metadata.get("inputs"), inputs,
                                                                         self.device)]
        arrays = signature.prepare(self.metadata.get("inputs"), [_host_array(x, i) for i, x in enumerate(inputs)])
        return [_tvm_tensor(x, self.device) for x in arrays]

    def __call__(self, *inputs):
        """The outputs for ``inputs``, numpy arrays or torch tensors: torch tensors (on the model's device) when
        some input is one, numpy arrays otherwise. The inputs are first checked against the metadata's
        ``"inputs"`` (number, shapes, dtypes, index ranges; :func:`tunewise.delivery.signature.prepare`): a bad input
        raises :class:`~tunewise.errors.ModelInputError` instead of reaching the kernels.

        Tensors go in and out through DLPack: an input on the model's device that is contiguous and aligned to
        :data:`ALIGNMENT` bytes (what TVM's kernels assume) and needs no dtype conversion is read where it
        lies, any other is copied first; an output shares the memory the VM wrote it in (copied only for a
        numpy array of a GPU model). A torch tensor on another device than the model's is refused. On a GPU
        the kernels run on the device's default stream."""
        leaves = self._run(self._to_device(inputs))
        if _holds_torch(inputs):
            import torch

            return tuple(torch.from_dlpack(y) for y in leaves)
        cpu = self.device.dlpack_device_type() == _CPU
        return tuple(np.from_dlpack(y) if cpu else y.numpy() for y in leaves)

    def _run(self, arguments: list) -> list:
        """The VM's output tensors for its ``arguments`` (TVM tensors on the model's device)."""
        return _leaves(self.vm["main"](*arguments))

    def time(self, *inputs: np.ndarray, repeat: int = 10, min_repeat_ms: int = 200) -> Latency:
        """Latency of one call, from ``repeat`` repeats of at least ``min_repeat_ms`` each (after a warm-up);
        the inputs are checked as in :meth:`__call__`."""
        evaluator = self.vm.time_evaluator("main", self.device, number=1, repeat=repeat,
                                           min_repeat_ms=min_repeat_ms)
        results = list(evaluator(*self._to_device(inputs)).results)
        return Latency(statistics.median(results), statistics.fmean(results), min(results), len(results))

    def save(self, path: str) -> str:
        """Write the artifact folder ``path`` (created if needed), ``model.so``'s checksum in the metadata;
        returns it."""
        os.makedirs(path, exist_ok=True)
        library = os.path.join(path, LIBRARY)
        self.export_library(library)
        metadata = {**self.metadata, "target": json.loads(str(self.target)),
                    artifact.CHECKSUM: artifact.sha256(library)}
        with open(os.path.join(path, METADATA), "w") as f:
            json.dump(metadata, f, indent=2, default=_jsonable)
        return path

    def export_library(self, path: str) -> None:
        """Write the model's shared library to ``path``: a copy of the file it was loaded from or first
        exported to. A model compiled here is exported once, to a folder of its own removed with it: an export
        links the whole model (about half its build), and TVM cannot export a loaded library again."""
        if self.library is None:
            folder = tempfile.mkdtemp(prefix="tunewise-model-")
            weakref.finalize(self, shutil.rmtree, folder, True)
            self.executable.export_library(os.path.join(folder, LIBRARY))
            self.library = os.path.join(folder, LIBRARY)
        if os.path.abspath(self.library) != os.path.abspath(path):
            shutil.copyfile(self.library, path)


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)


def _leaves(out) -> list:
    """The tensors of a VM result (a tensor, or nested tuples of them), in order."""
    if hasattr(out, "data_ptr"):
        return [out]
    return [leaf for item in out for leaf in _leaves(item)]


ALIGNMENT = 64
"""Bytes an input's data must be aligned to for the VM to read it in place: TVM's allocation alignment, which its
kernels assume of every argument."""


_CPU = 1  # DLPack's device type of the CPU (kDLCPU)


def _holds_torch(inputs) -> bool:
    """Whether some input is a torch tensor (torch is not imported for the question)."""
    torch = sys.modules.get("torch")
    return torch is not None and any(isinstance(x, torch.Tensor) for x in inputs)


def _host_array(x, index: int):
    """Input ``x`` as a numpy array: a CPU torch tensor as a view of its memory (no copy)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor):
        return x
    if x.device.type != "cpu":
        raise ModelInputError(f"input {index} is on {x.device}; the model runs on the CPU")
    try:
        return x.detach().resolve_conj().resolve_neg().numpy()
    except TypeError:  # a dtype numpy has not (bfloat16)
        raise ModelInputError(f"input {index} is {str(x.dtype).removeprefix('torch.')}, which the model does not "
                              "take") from None


def _device_tensors(specs: list[dict] | None, inputs, device) -> list:
    """Torch tensors on the GPU ``device`` (TVM's), checked against ``specs`` as
    :func:`tunewise.delivery.signature.prepare` checks arrays, without copying them to the host."""
    import torch

    if specs is not None and len(inputs) != len(specs):
        raise ModelInputError(f"the model takes {len(specs)} input(s), got {len(inputs)}")
    checked = []
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or x.device.type != "cuda" or x.device.index != device.index:
            where = x.device if isinstance(x, torch.Tensor) else f"a host {type(x).__name__}"
            raise ModelInputError(f"input {i} is {where}; the model takes torch tensors on cuda:{device.index}")
        x = x.detach()
        if specs is not None:
            spec = specs[i]
            if list(x.shape) != list(spec["shape"]):
                raise ModelInputError(f"input {i} must have shape {tuple(spec['shape'])}, got {tuple(x.shape)}")
            want = getattr(torch, spec["dtype"])
            if x.dtype != want:
                if not (x.dtype.is_floating_point and want.is_floating_point):
                    raise ModelInputError(f"input {i} must be {spec['dtype']}, got {x.dtype}")
                x = x.to(want)
            if "index_range" in spec and x.numel():
                low, high = spec["index_range"]
                smallest, largest = (int(v) for v in torch.aminmax(x))
                if smallest < low or largest >= high:
                    raise ModelInputError(f"input {i} holds indices in [{smallest}, {largest}]; its values must lie "
                                          f"in [{low}, {high}) (it indexes a table of {high} rows)")
        checked.append(x)
    return checked


def _tvm_tensor(x, device):
    """``x`` (a numpy array or a torch tensor on ``device``) as a VM argument: its own memory through DLPack where
    that is contiguous, aligned to :data:`ALIGNMENT` and writable, else a copy."""
    import tvm
    import tvm_ffi

    if isinstance(x, np.ndarray):
        in_place = x.flags.c_contiguous and x.flags.writeable and x.ctypes.data % ALIGNMENT == 0
        if not in_place or device.dlpack_device_type() != _CPU:
            return tvm.runtime.tensor(x, device)
    elif not x.is_contiguous() or x.data_ptr() % ALIGNMENT:
        x = x.clone(memory_format=sys.modules["torch"].contiguous_format)  # freshly allocated: aligned
    return tvm_ffi.from_dlpack(x, require_alignment=ALIGNMENT, require_contiguous=True)


@logs.quiet("load")
def load(path: str) -> CompiledModel:
    """Load an artifact folder written by :meth:`CompiledModel.save`, its files checked first
    (:func:`tunewise.delivery.artifact.read`); :class:`InputError` when they are damaged."""
    import tvm

    metadata = artifact.read(path)
    try:
        target = tvm.target.Target(metadata["target"])
    except Exception as err:  # TVM raises several error types for a bad target
        raise TargetError(f"{os.path.join(path, METADATA)} names a bad target: {message_line(err, last=True)}") \
            from None
    try:
        check_runnable(target)
    except TargetError as err:
        raise TargetError(f"cannot run {path}: {err}") from None
    try:
        executable = tvm.runtime.load_module(os.path.join(path, LIBRARY))
    except Exception as err:  # TVM's own error types
        raise InputError(f"cannot load {os.path.join(path, LIBRARY)}: {message_line(err)}") from None
    return CompiledModel(executable, target, metadata, library=os.path.join(path, LIBRARY))


def verify(compiled: CompiledModel, inputs, reference, *, rtol: float = kernel_checks.RTOL,
           atol: float = kernel_checks.ATOL) -> float:
    """Check ``compiled(*inputs)`` against ``reference``; returns the largest error relative to the output scale.

    Raises :class:`VerificationError` when an output's shape differs or some element is off by more than
    ``atol * scale + rtol * |expected|``, where ``scale`` is the largest magnitude of that reference output
    (:func:`tunewise.tuning.kernel_checks.close`).
    """
    return _compared(compiled(*inputs), reference, rtol=rtol, atol=atol)


def _compared(outputs, reference, *, rtol: float, atol: float) -> float:
    """:func:`verify` of ``outputs`` (a compiled model's, numpy arrays) against ``reference``."""
    if len(outputs) != len(reference):
        raise VerificationError(f"compiled model returns {len(outputs)} outputs, reference {len(reference)}")
    worst = 0.0
    for i, (got, want) in enumerate(zip(outputs, reference, strict=True)):
        if got.shape != want.shape:
            raise VerificationError(f"output {i} has shape {got.shape}, reference {want.shape}")
        error, scale = np.abs(got.astype(np.float64) - want.astype(np.float64)), kernel_checks.scale(want)
        if not kernel_checks.close(got, want, rtol=rtol, atol=atol):
            raise VerificationError(f"output {i} differs from the reference: max error {error.max():.3g} "
                                    f"(scale {scale:.3g})")
        worst = max(worst, float(error.max()) / scale if error.size else 0.0)
    return worst


CLASSES = 10
"""The fewest columns of a classifier-shaped output (``(batch, classes)``), whose arg-max :func:`accuracy` compares."""


def accuracy(compiled: CompiledModel, model) -> dict:
    """How ``compiled`` computes ``model`` (an :class:`~tunewise.lowering.tasks.ExtractedModel`) on its further
    samples (:data:`tunewise.importing.frontend.SAMPLES`) beside its example: ``samples`` (how many inputs in
    all), ``max_relative_error`` (the largest error of an output element over the largest magnitude of that
    reference output, over them all) and ``argmax_agreement`` (for outputs of :data:`CLASSES` or more columns,
    the fraction of rows whose arg-max is the reference's; ``None`` without such an output). Raises
    :class:`VerificationError` where an output is outside the tolerance of the model's precision."""
    rtol, atol = kernel_checks.tolerance(model.precision)
    worst, agree, rows = 0.0, 0, 0
    for inputs, reference in ((model.inputs, model.reference_outputs), *model.samples):
        outputs = compiled(*inputs)
        worst = max(worst, _compared(outputs, reference, rtol=rtol, atol=atol))
        for got, want in zip(outputs, reference, strict=True):
            if want.ndim == 2 and want.shape[1] >= CLASSES and want.dtype.kind == "f":
                agree += int((got.argmax(axis=1) == want.argmax(axis=1)).sum())
                rows += want.shape[0]
    return {"samples": 1 + len(model.samples), "max_relative_error": worst,
            "argmax_agreement": agree / rows if rows else None}


def compile_checked(model, database=None) -> tuple[CompiledModel, float]:
    """``model`` (an :class:`~tunewise.lowering.tasks.ExtractedModel`) compiled for its target, with ``database``'s
    best records as :func:`build` applies them, and its outputs checked against the model's reference
    outputs (:func:`verify`): the compiled model and its largest relative error.

    Where the outputs differ, the cause is sought. The model compiled untuned differing as well raises
    :class:`~tunewise.errors.ImportMismatchError`: TVM computes the model otherwise than its framework, whatever
    the tuning. Else each task's record is checked against its untuned schedule alone, the records that compute
    otherwise passed over for the task's next fastest that does not
    (:func:`tunewise.tuning.kernel_checks.first_matching`; a store's database then leaves them out,
    :meth:`StoreDatabase.reject
    <tunewise.stores.StoreDatabase.reject>`), and the model compiled and checked again; a
    :class:`VerificationError` when it still differs."""
    try:
        return _checked(model, build(model, database))
    except VerificationError as err:
        if database is None:
            raise _import_mismatch(err) from None
    try:
        _checked(model, build(model))
    except VerificationError as err:
        raise _import_mismatch(err) from None
    from tunewise.stores import StoreDatabase

    records, wrong = kernel_checks.first_matching(model, faster_records(model, database, k=FALLBACK_RECORDS))
    if isinstance(database, StoreDatabase):  # the run's later checks and searches go without them
        for record in wrong:
            database.reject(record)
    try:
        return _checked(model, _build(model, records_database(model, records)))
    except VerificationError as err:
        raise VerificationError(f"{err}, though the model compiled untuned matches and each tuned kernel alone "
                                f"computes what its untuned schedule does") from None


def _import_mismatch(untuned: VerificationError) -> ImportMismatchError:
    return ImportMismatchError(f"the model TVM compiles differs from the original before any tuning, so no tuning "
                               f"can mend it (an operator TVM imports or compiles otherwise): {untuned}")


def _checked(model, executable) -> tuple[CompiledModel, float]:
    compiled = CompiledModel(executable, model.target)
    rtol, atol = kernel_checks.tolerance(model.precision)
    return compiled, verify(compiled, model.inputs, model.reference_outputs, rtol=rtol, atol=atol)


def io_metadata(inputs, outputs, mod=None) -> dict:
    """Shapes and dtypes of inputs and outputs, for the artifact's metadata; with the compiled Relax module
    ``mod``, also the inputs' names and index ranges (:func:`tunewise.delivery.signature.describe_inputs`), which
    :meth:`CompiledModel.__call__` checks."""
    described = (signature.describe_inputs(mod, inputs) if mod is not None
                 else [{"shape": list(x.shape), "dtype": str(x.dtype)} for x in inputs])
    return {"inputs": described, "outputs": [{"shape": list(y.shape), "dtype": str(y.dtype)} for y in outputs]}
