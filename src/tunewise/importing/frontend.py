"""Model import: a ``torch.nn.Module``, a saved ``ExportedProgram`` (``.pt2``), or an ``.onnx`` file.

Every path ends in an :class:`ImportedModel`: the Relax module with the weights embedded as constants, the
example inputs, and the reference outputs computed by the source framework (torch, or onnxruntime for ONNX)
on those inputs, which the compiled model is checked against before anything is saved.
"""

from __future__ import annotations

import logging
import os
import zipfile
from dataclasses import dataclass

import numpy as np

from tunewise.errors import InputError, ModelImportError, message_line
from tunewise.importing import import_cache
from tunewise.job import logs


@dataclass(frozen=True)
class ImportedModel:
    """A model ready for graph passes and tuning."""

    name: str
    mod: object  # tvm.IRModule with a Relax "main"
    inputs: tuple[np.ndarray, ...]
    reference_outputs: tuple[np.ndarray, ...]
    samples: tuple = ()  # (inputs, reference outputs) of further random inputs drawn like ``inputs`` (SAMPLES)

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(x.shape for x in self.inputs)


SAMPLES = 8
"""Further random inputs a model is imported with, beside its example, and the source framework's outputs for
each: what a compiled model's accuracy is stated on (how often a classifier's arg-max agrees)."""


def _samples(run, inputs: tuple[np.ndarray, ...], seed: int) -> tuple:
    """:data:`SAMPLES` ``(inputs, outputs)`` pairs: inputs drawn like ``inputs`` (:func:`_example_input`, seeded
    by ``seed``), ``run(*inputs)`` (the source framework, numpy in and out) the outputs."""
    generator = np.random.default_rng([seed, SAMPLES])
    pairs = []
    for _ in range(SAMPLES):
        drawn = tuple(_example_input(x, generator) for x in inputs)
        pairs.append((drawn, tuple(run(*drawn))))
    return tuple(pairs)


def _torch_runner(module):
    """``module`` as :func:`_samples` runs it: numpy arrays in, its outputs as numpy arrays out."""
    import torch

    def run(*inputs):
        with torch.no_grad():
            return _as_numpy_outputs(module(*(torch.from_numpy(x) for x in inputs)))

    return run


def _numpy(tensor, what: str) -> np.ndarray:
    """``tensor`` as a numpy array; :class:`ModelImportError` for a dtype numpy has not (``bfloat16``)."""
    try:
        return tensor.detach().cpu().numpy()
    except TypeError:  # torch: "Got unsupported ScalarType BFloat16"
        raise ModelImportError(f"{what} is {str(tensor.dtype).removeprefix('torch.')}, which numpy, and so the "
                               f"output check, cannot hold: export the model in float32") from None


def _as_numpy_outputs(out) -> tuple[np.ndarray, ...]:
    """The tensors of a model's output (a tensor, or tuples, lists and dicts of them), in the order
    ``torch.export`` flattens them in, as numpy arrays."""
    import torch
    from torch.utils import _pytree

    leaves = [x for x in _pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
    return tuple(_numpy(x, f"output {i}") for i, x in enumerate(leaves))


def _check_static(ep) -> None:
    dynamic = []
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        shape = getattr(val, "shape", ())
        if any(not isinstance(d, int) for d in shape):
            dynamic.append(f"{node.name}{tuple(str(d) for d in shape)}")
    if dynamic:
        raise ModelImportError(f"dynamic shapes are not supported: {', '.join(dynamic)}; export with static shapes")


def _relax_from_exported(ep, name: str):
    from tvm.relax.frontend.torch import from_exported_program

    from tunewise.importing import repairs

    _check_static(ep)
    repairs.true_divisions(ep)
    try:
        mod = from_exported_program(ep, custom_convert_map=repairs.converters())
    except AssertionError as err:  # the torch frontend reports unsupported operators this way
        raise ModelImportError(f"cannot import {name}: {message_line(err)}") from None
    except (KeyError, NotImplementedError, ValueError, TypeError) as err:
        raise ModelImportError(f"cannot import {name}: {type(err).__name__}: {err}") from None
    return repairs.repair(mod)


def from_torch(model, example_inputs, *, name: str = "model") -> ImportedModel:
    """Import ``model`` traced with ``torch.export`` on ``example_inputs`` (a tensor or tuple of tensors)."""
    import torch

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    model = model.eval()
    with torch.no_grad():
        reference = _as_numpy_outputs(model(*example_inputs))
        try:
            ep = torch.export.export(model, tuple(example_inputs))
        except Exception as err:  # torch.export raises many types; the first line says what failed
            raise ModelImportError(f"torch.export failed for {name}: {message_line(err)}") from None
    mod = _relax_from_exported(ep, name)
    inputs = tuple(_numpy(x, f"input {i}") for i, x in enumerate(example_inputs))
    return ImportedModel(name, mod, inputs, reference, _samples(_torch_runner(model), inputs, 0))


def _example_input(spec, generator: np.random.Generator) -> np.ndarray:
    shape = tuple(int(d) for d in spec.shape)
    if np.issubdtype(spec.dtype, np.integer):
        return generator.integers(0, 2, size=shape).astype(spec.dtype)
    return generator.standard_normal(shape).astype(spec.dtype)


class _KeptErrors(logging.Handler):
    """Keeps the exceptions of the log records it receives instead of printing them."""

    def __init__(self):
        super().__init__()
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


def read_exported_program(path: str):
    """The ``torch.export.save``d program at ``path``; :class:`ModelImportError` when it cannot be read."""
    import torch

    if not zipfile.is_zipfile(path):
        raise ModelImportError(f"cannot read exported program {path}: not a torch.export.save archive (a zip file)")
    logger, kept = logging.getLogger("torch.export"), _KeptErrors()  # a failed load logs its traceback
    handlers, propagate = logger.handlers, logger.propagate
    logger.handlers, logger.propagate = [kept], False
    try:
        return torch.export.load(path)
    except Exception as err:
        cause = kept.errors[0] if kept.errors else err
        raise ModelImportError(f"cannot read exported program {path}: {message_line(cause)}") from None
    finally:
        logger.handlers, logger.propagate = handlers, propagate


def from_exported_program_file(path: str, *, seed: int = 0) -> ImportedModel:
    """Import a ``torch.export.save``d program; inputs are its saved example inputs or seeded random ones."""
    import torch

    name = os.path.splitext(os.path.basename(path))[0]
    ep = read_exported_program(path)
    _check_static(ep)
    saved = getattr(ep, "example_inputs", None)
    if saved and saved[0]:
        example = tuple(saved[0])
    else:
        generator = np.random.default_rng(seed)
        user_inputs = [n for n in ep.graph.nodes if n.op == "placeholder"
                       and n.name in ep.graph_signature.user_inputs]
        example = tuple(torch.from_numpy(_example_input(_numpy(n.meta["val"], f"input {n.name}"), generator))
                        for n in user_inputs)
    with torch.no_grad():
        reference = _as_numpy_outputs(ep.module()(*example))
    mod = _relax_from_exported(ep, name)
    inputs = tuple(_numpy(x, f"input {i}") for i, x in enumerate(example))
    return ImportedModel(name, mod, inputs, reference, _samples(_torch_runner(ep.module()), inputs, seed))


def _onnx_input_shapes(model, overrides: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    initializers = {i.name for i in model.graph.initializer}
    unknown = set(overrides) - {i.name for i in model.graph.input if i.name not in initializers}
    if unknown:
        raise InputError(f"--input-shape names unknown ONNX inputs: {', '.join(sorted(unknown))}")
    shapes = {}
    for inp in model.graph.input:
        if inp.name in initializers:
            continue
        dims = inp.type.tensor_type.shape.dim
        if inp.name in overrides:
            known = inp.type.tensor_type.HasField("shape")  # an input without shape information takes any
            shapes[inp.name] = _onnx_override(inp.name, dims, overrides[inp.name]) if known else overrides[inp.name]
            continue
        if any(not d.HasField("dim_value") for d in dims):
            symbolic = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
            example = ",".join(str(d) if isinstance(d, int) and d > 0 else "1" for d in symbolic)
            raise ModelImportError(f"ONNX input {inp.name!r} has dynamic shape {symbolic}; give it with "
                                   f"--input-shape {inp.name}={example} (its dynamic dimensions set to 1 here; "
                                   "choose their sizes)")
        shapes[inp.name] = tuple(d.dim_value for d in dims)
    return shapes


def _onnx_override(name: str, dims, override: tuple[int, ...]) -> tuple[int, ...]:
    """``override`` for ONNX input ``name`` of dimensions ``dims``; it may set only the dynamic ones."""
    declared = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
    if len(override) == len(dims) and all(not isinstance(want, int) or want == got
                                          for want, got in zip(declared, override, strict=True)):
        return override
    if all(isinstance(d, int) for d in declared):
        raise InputError(f"ONNX input {name!r} has the static shape {tuple(declared)}; --input-shape "
                         f"{name}={','.join(map(str, override))} cannot change it")
    raise InputError(f"ONNX input {name!r} has shape {declared}; --input-shape {name}=... can set only its "
                     f"dynamic dimensions, got {list(override)}")


def check_input_shapes(imported: ImportedModel, overrides: dict[str, tuple[int, ...]], source: str) -> None:
    """Raise :class:`InputError` unless every shape in ``overrides`` is that of the named input of ``imported``
    (a torch model, exported with static shapes that cannot be changed at import)."""
    expected = dict(zip((p.name for p in imported.mod["main"].params), imported.input_shapes, strict=False))
    for name, shape in overrides.items():
        if tuple(shape) == expected.get(name):
            continue
        takes = ", ".join(f"{n} {tuple(s)}" for n, s in expected.items())
        what = "has no input" if name not in expected else "has a fixed shape for input"
        raise InputError(f"{source} {what} {name!r} (it takes {takes}); --input-shape applies to dynamic "
                         f"ONNX inputs only: export the model again for {name}={','.join(map(str, shape))}")


def from_onnx_file(path: str, *, input_shapes: dict[str, tuple[int, ...]] | None = None,
                   seed: int = 0) -> ImportedModel:
    """Import an ONNX model; reference outputs come from onnxruntime on seeded random inputs."""
    import onnx
    import onnxruntime
    from tvm.relax.frontend.onnx import from_onnx

    name = os.path.splitext(os.path.basename(path))[0]
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as err:
        raise ModelImportError(f"{path} is not a valid ONNX model: {message_line(err)}") from None
    shapes = _onnx_input_shapes(model, input_shapes or {})
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime's own error types; the message names the problem
        raise ModelImportError(f"onnxruntime cannot load {path}: {message_line(err)}") from None
    generator = np.random.default_rng(seed)
    feeds = {}
    for inp in session.get_inputs():
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(
            next(i for i in model.graph.input if i.name == inp.name).type.tensor_type.elem_type))
        feeds[inp.name] = _example_input(np.empty(shapes[inp.name], dtype=dtype), generator)
    try:
        reference = tuple(session.run(None, feeds))
    except Exception as err:  # onnxruntime's own error types, e.g. InvalidArgument on shapes it cannot take
        given = ", ".join(f"{k}={','.join(map(str, v.shape))}" for k, v in feeds.items())
        raise InputError(f"onnxruntime cannot run {path} on inputs {given}: {message_line(err)}") from None
    dtypes = {k: str(v.dtype) for k, v in feeds.items()}
    with logs.prints_routed():  # the importer prints each operator it fails to convert
        try:
            mod = from_onnx(model, shape_dict=shapes, dtype_dict=dtypes, keep_params_in_input=False)
        except Exception as err:
            try:  # e.g. "Dynamic pads are not supported": pads an exporter computes from constants at run time
                mod = from_onnx(_constants_folded(model), shape_dict=shapes, dtype_dict=dtypes,
                                keep_params_in_input=False)
            except Exception:
                raise ModelImportError(f"cannot import {path}: {message_line(err)}") from None
    inputs = tuple(feeds[k] for k in shapes)
    samples = _samples(lambda *xs: session.run(None, dict(zip(shapes, xs, strict=True))), inputs, seed)
    return ImportedModel(name, mod, inputs, reference, samples)


def _constants_folded(model):
    """``model`` with what it computes from constants alone computed once, by onnxruntime's basic graph
    optimisations (constant folding and redundant-node elimination, in standard ONNX operators). TVM's importer
    takes some operands (a ``Pad``'s pads, a ``Reshape``'s shape) only as constants, where exporters may emit
    them as small subgraphs of constants."""
    import tempfile

    import onnx
    import onnxruntime

    with tempfile.TemporaryDirectory(prefix="tunewise-onnx-") as folder:
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = os.path.join(folder, "folded.onnx")
        onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return onnx.load(options.optimized_model_filepath)


def parse_input_shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    """Parse ``["x=1,3,224,224", ...]`` into ``{"x": (1, 3, 224, 224)}``."""
    shapes = {}
    for spec in specs:
        name, _, dims = spec.partition("=")
        try:
            shapes[name] = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise InputError(f"bad --input-shape {spec!r}: expected NAME=D1,D2,...") from None
        if not name or any(d <= 0 for d in shapes[name]):
            raise InputError(f"bad --input-shape {spec!r}: expected NAME=D1,D2,... with positive sizes")
    return shapes


def load(source, *, example_inputs=None, input_shapes: dict | None = None, seed: int = 0) -> ImportedModel:
    """Import from a zoo name, a file path (``.pt2``, ``.onnx``), or a ``torch.nn.Module`` + example inputs; a zoo
    name or a file imported before is read from the import cache (:mod:`tunewise.importing.import_cache`)."""
    if not isinstance(source, str):
        if example_inputs is None:
            raise InputError("a torch module needs example_inputs")
        imported = from_torch(source, example_inputs, name=type(source).__name__.lower())
        check_input_shapes(imported, input_shapes or {}, imported.name)
        return imported
    model_file = source.endswith((".onnx", ".pt2"))
    if model_file:
        check_source(source)
    cache_key = import_cache.key(source, zoo_model=not model_file, input_shapes=input_shapes, seed=seed)
    kept = import_cache.get(cache_key)  # a zoo model's entry is found without importing the zoo (and torch)
    if kept is not None:
        return ImportedModel(*kept)
    if not model_file:
        check_source(source)  # an unknown name is refused here: a known one had no entry
    imported = _import_named(source, input_shapes=input_shapes, seed=seed)
    import_cache.put(cache_key, imported)
    return imported


def _import_named(source: str, *, input_shapes: dict | None, seed: int) -> ImportedModel:
    """Import a zoo model or a model file (:func:`check_source` passed)."""
    from tunewise import zoo

    if source.endswith(".onnx"):
        return from_onnx_file(source, input_shapes=input_shapes, seed=seed)
    if source in zoo.MODELS:
        model, inputs = zoo.get(source, seed=seed)
        imported = from_torch(model, inputs, name=source)
    else:
        imported = from_exported_program_file(source, seed=seed)
    check_input_shapes(imported, input_shapes or {}, source)
    return imported


def check_source(source: str) -> None:
    """Raise :class:`InputError` unless ``source`` names a zoo model or an existing ``.onnx``/``.pt2`` file."""
    from tunewise import zoo

    if source in zoo.MODELS:
        return
    if source.endswith((".onnx", ".pt2")):
        if not os.path.isfile(source):
            raise InputError(f"no such model file: {source}")
        return
    if os.path.exists(source):
        raise InputError(f"unsupported model file {source}: expected .onnx or .pt2")
    raise InputError(f"unknown model {source!r}: not a file, and not a zoo model ({', '.join(zoo.MODELS)})")
