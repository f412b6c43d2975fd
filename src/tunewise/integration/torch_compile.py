"""``torch.compile(model, backend="tunewise", options={...})``: each graph Dynamo captures, tuned and compiled by
tunewise, or compiled without tuning from the records a store holds of it (options: README, "torch.compile").

A graph is named by a digest of its code, weights, input shapes and dtypes, the target, the graph level and the
versions (:func:`graph_name`). The backend loads the graph's artifact, ``OUTPUT/NAME``, when it is whole; else,
where the store holds a run of that name tuned to its end, compiles it from the store's records without tuning;
else tunes it as a new run under the options' budget (:func:`tunewise.tune`); then saves the artifact. Weights
are compiled in as constants (a call after they changed in place is refused); calls take and return torch
tensors through DLPack. An unknown option is an :class:`~tunewise.errors.InputError` listing the valid ones.

A graph that needs gradients is refused with an :class:`~tunewise.errors.InputError`. A graph tunewise cannot
import or compile, one with dynamic shapes or non-tensor inputs, and one not wholly on the CPU or on CUDA GPU 0
run eagerly, with a warning saying why; a graph without operators runs as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from tunewise.errors import ImportMismatchError, InputError, ModelImportError
from tunewise.importing import import_cache

PREFIX = "torch_compile_"
_OWN_OPTIONS = ("store", "output", "target", "progress")
_NOT_OPTIONS = ("source", "output")  # RunSettings fields the backend sets itself (output: its own option)


def default_folder() -> str:
    """The default folder of the store and the artifacts: ``torch-compile`` in ``$TUNEWISE_CACHE_DIR``, or where
    that is unset or empty, in ``$XDG_CACHE_HOME/tunewise`` (by default ``~/.cache/tunewise``)."""
    root = os.environ.get(import_cache.CACHE_DIR_VARIABLE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tunewise")
    return os.path.join(root, "torch-compile")


def default_store() -> str:
    """The default store: ``tunewise.db`` in :func:`default_folder`."""
    return f"sqlite:///{os.path.join(default_folder(), 'tunewise.db')}"


@dataclass(frozen=True)
class Options:
    """The backend's options, checked: the run settings and scheduler (a name in the settings, or an object) of
    graphs it tunes, the store (URL or :class:`~tunewise.stores.Store`; ``None``: the default), the artifacts'
    folder, the target spec (``None``: by the graph's device) and the live display (``None``: on a terminal)."""

    settings: object  # RunSettings
    scheduler: object
    store: object
    output: str
    target: object = None
    progress: bool | None = None


def parse_options(options: Mapping | None) -> Options:
    """The :class:`Options` that ``torch.compile``'s ``options`` give; :class:`InputError` on an unknown or bad
    one."""
    from tunewise.budget import Budget
    from tunewise.cli import parse_duration, parse_energy
    from tunewise.job import workflow
    from tunewise.settings import RunSettings
    from tunewise.tuning import model_checks

    options = dict(options or {})
    limits = [f.name for f in dataclasses.fields(Budget)]
    fields = [f.name for f in dataclasses.fields(RunSettings) if f.name not in _NOT_OPTIONS]
    valid = [*_OWN_OPTIONS, *limits, *fields]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise InputError(f"unknown tunewise option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                         f"valid: {', '.join(valid)}")
    own = {k: options.pop(k) for k in _OWN_OPTIONS if k in options}
    budget = {k: options.pop(k) for k in limits if k in options}
    if isinstance(budget.get("time_budget"), str):
        budget["time_budget"] = parse_duration(budget["time_budget"])
    if isinstance(options.get("energy_budget"), str):
        options["energy_budget"] = parse_energy(options["energy_budget"])
    words = (model_checks.EPOCH, model_checks.NEVER)
    if isinstance(options.get("check_every"), str) and options["check_every"] not in words:
        options["check_every"] = parse_duration(options["check_every"], "model-check interval",
                                                words=words)
    settings, scheduler = workflow.with_overrides(RunSettings(), options)
    if budget:
        settings = dataclasses.replace(settings, budget=Budget(**budget) if {"max_trials", "time_budget"} & set(budget)
                                       else dataclasses.replace(settings.budget, **budget))
    return Options(settings, scheduler, own.get("store"), os.path.abspath(own.get("output") or default_folder()),
                   own.get("target"), own.get("progress"))


def backend(gm, example_inputs, *, options: Mapping | None = None, mode: str | None = None):
    """The ``torch.compile`` backend ``"tunewise"`` (see the module's docstring): a callable computing what
    Dynamo's graph ``gm`` computes, for inputs like ``example_inputs``."""
    import torch

    if mode is not None:
        raise InputError(f"the tunewise backend has no modes (got mode={mode!r}): give its settings as options")
    chosen = parse_options(options)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if not any(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes):
        return gm.forward
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
        raise InputError("tunewise compiles graphs for inference, and this one needs gradients (grad mode is on "
                         "and an input or weight requires grad): call the model under torch.no_grad() or "
                         "torch.inference_mode()")
    reason = _eager_reason(placeholders, example_inputs)
    if reason is not None:
        return _eager(gm, reason)
    weights = [i for i, node in enumerate(placeholders) if _is_weight(node, example_inputs[i])]
    users = [i for i in range(len(placeholders)) if i not in weights]
    if not users:
        return _eager(gm, "it takes no inputs but weights")
    target = _target(chosen.target, example_inputs[users[0]].device)
    module = exportable(gm, {placeholders[i].name: example_inputs[i] for i in weights})
    inputs = tuple(example_inputs[i] for i in users)
    name = graph_name(module, inputs, target, chosen.settings.level)
    type(module).__name__ = name  # tunewise names a module's model after its class (GraphModule's class_name)
    try:
        compiled = compile_graph(module, inputs, name, target, chosen)
    except (ModelImportError, ImportMismatchError) as err:
        return _eager(gm, str(err))
    outputs = gm.graph.output_node().args[0]
    form = list if isinstance(outputs, list) else tuple if isinstance(outputs, tuple) else None
    return CompiledGraph(compiled, users, {i: example_inputs[i] for i in weights}, form=form)


def _eager_reason(placeholders, example_inputs) -> str | None:
    """Why a graph runs eagerly (``None``: it need not): inputs other than tensors, dynamic shapes, tensors on
    several devices or on one tunewise does not compile for."""
    import torch

    if any(not isinstance(x, torch.Tensor) for x in example_inputs):
        return "it takes inputs other than tensors (dynamic shapes, Python numbers): compile with dynamic=False"
    for node in placeholders:
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in value.shape):
            return "its shapes are dynamic: compile with dynamic=False"
    devices = {x.device for x in example_inputs}
    if len(devices) > 1:
        return f"its tensors are on several devices ({', '.join(sorted(map(str, devices)))})"
    device = next(iter(devices), torch.device("cpu"))
    if device.type not in ("cpu", "cuda") or (device.type == "cuda" and device.index not in (None, 0)):
        return f"its tensors are on {device}; tunewise compiles for the CPU and CUDA GPU 0"
    return None


def _is_weight(node, value) -> bool:
    """Whether Dynamo's placeholder ``node`` is a module's parameter or buffer."""
    import torch
    from torch._dynamo.source import ParamBufferSource, UnspecializedParamBufferSource

    source = getattr(node.meta.get("grapharg"), "source", None)
    while source is not None:
        if isinstance(source, (ParamBufferSource, UnspecializedParamBufferSource)):
            return True
        source = getattr(source, "base", None)
    return isinstance(value, torch.nn.Parameter)


def _target(spec, device):
    """The target for a graph on ``device``: ``spec`` resolved (its device must be the graph's), by default the
    CPU or GPU 0."""
    from tunewise import target as targets

    resolved = targets.resolve(spec if spec is not None else ("cuda" if device.type == "cuda" else None))
    if targets.is_gpu(resolved) != (device.type == "cuda"):
        raise InputError(f"target {resolved.kind.name} does not run the graph's tensors, which are on {device}")
    return resolved


def _eager(gm, reason: str):
    """``gm`` run as it is, with a warning saying why."""
    operators = sum(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes)
    warnings.warn(f"tunewise runs a graph of {operators} operators eagerly: {reason}", stacklevel=2)
    return gm.forward


def exportable(gm, weights: Mapping):
    """Dynamo's graph ``gm`` as a ``torch.fx.GraphModule`` whose placeholders named in ``weights`` (placeholder
    name -> tensor) are its own buffers, which ``torch.export`` and tunewise compile in as constants; it takes the
    other inputs, in their order."""
    import torch

    graph, mapping = torch.fx.Graph(), {}
    for node in gm.graph.nodes:
        if node.op == "placeholder" and node.name not in weights:
            mapping[node] = graph.node_copy(node, lambda n: mapping[n])
    for node in gm.graph.nodes:
        if node.op == "placeholder" and node.name in weights:
            mapping[node] = graph.get_attr(node.name)
    graph.output(graph.graph_copy(gm.graph, mapping))
    attributes = {n.target: _attribute(gm, n.target) for n in gm.graph.nodes if n.op in ("get_attr", "call_module")}
    attributes.update({key: value.detach() for key, value in weights.items()})
    return torch.fx.GraphModule(attributes, graph)


def _attribute(module, target: str):
    for part in target.split("."):
        module = getattr(module, part)
    return module


def graph_name(module, inputs, target, level: str | None) -> str:
    """The name of the graph ``module`` (an :func:`exportable` module) on ``inputs`` compiled for ``target`` at
    graph ``level`` (``None``: the target's): :data:`PREFIX` and 16 hex digits of a digest of its code, its
    submodules, its buffers and parameters, the inputs' shapes and dtypes, the target, the level and the versions
    of torch, TVM and tunewise."""
    from importlib import metadata

    import torch

    from tunewise import __version__
    from tunewise.lowering import graph

    digest = hashlib.sha256()

    def add(*parts) -> None:
        for part in parts:
            digest.update(part if isinstance(part, bytes) else str(part).encode())
            digest.update(b"\0")

    add(module.code, str(target), level or graph.default_level(target), torch.__version__,
        metadata.version("apache-tvm"), __version__)
    for key, sub in module.named_modules():
        add(key, type(sub).__qualname__, sub.extra_repr())
    for key, tensor in [*module.named_parameters(), *module.named_buffers()]:
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        add(key, tensor.dtype, tuple(tensor.shape), flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    for x in inputs:
        add(x.dtype, tuple(x.shape))
    return PREFIX + digest.hexdigest()[:16]


def compile_graph(module, inputs, name: str, target, options: Options):
    """The :class:`~tunewise.delivery.compile.CompiledModel` of graph ``name`` (an :func:`exportable` ``module`` on
    ``inputs``) for ``target``: its artifact loaded, else compiled from the store's records of a run of it that
    tuned to its end, else tuned as a new run (see the module's docstring)."""
    from tunewise import stores
    from tunewise.delivery import compile as compiler
    from tunewise.job import workflow

    folder = os.path.join(options.output, name)
    if os.path.isdir(folder):
        try:
            loaded = compiler.load(folder)
            if loaded.metadata.get("model") == name:
                return loaded
        except InputError:  # damaged: made again
            pass
    if options.store is None:
        os.makedirs(default_folder(), exist_ok=True)
    store = stores.create(options.store or default_store())
    try:
        run = tuned_run(store, name, target)
        if run is not None:
            return compile_from_store(module, inputs, name, target, options.settings.level, store, run, folder)
        result = workflow.tune(module, options.settings, example_inputs=inputs, target=target, store=store,
                               output=folder, scheduler=options.scheduler, compare_torch=False,
                               progress=options.progress, timing_rounds=1)
    finally:
        if not isinstance(options.store, stores.Store):
            store.close()
    return compiler.load(result.artifact)


def tuned_run(store, name: str, target):
    """The latest run of ``store`` that tuned graph ``name`` for ``target`` to its end (finished, or tuned and not
    saved), or ``None``."""
    from tunewise import stores

    runs = [r for r in store.get_runs() if r.model == name and r.target == str(target)
            and r.status in (stores.FINISHED, stores.TUNED)]
    return runs[-1] if runs else None


def compile_from_store(module, inputs, name: str, target, level: str | None, store, run, folder: str):
    """Graph ``name`` imported, compiled with ``store``'s best records of its tasks (those that beat the default
    latencies run ``run`` measured), checked against PyTorch's outputs and saved to ``folder``: no tuning."""
    from tunewise.delivery import compile as compiler
    from tunewise.importing import frontend
    from tunewise.job import logs
    from tunewise.lowering import tasks
    from tunewise.stores import StoreDatabase
    from tunewise.tuning import tvm_env

    with logs.routed("compile"):
        tvm_env.prepare(target.kind.name)
        model = tasks.extract(frontend.from_torch(module, inputs, name=name), target, level=level)
        database = StoreDatabase(store, target=target)
        defaults = {t.workload: t.default_latency for t in store.get_tasks(run.id)}
        model = model.with_default_latencies([defaults.get(database.workload_id(m), math.inf)
                                              for m in model.task_mods])
        compiled, error = compiler.compile_checked(model, database)
        compiled.metadata.update(model=name, run=run.id, records=f"the store's, after run {run.id}",
                                 max_relative_error=error,
                                 **compiler.io_metadata(model.inputs, model.reference_outputs, model.mod))
        compiled.save(folder)
    return compiled


class CompiledGraph:
    """What the backend returns for a compiled graph: called with the graph's inputs (weights included, in
    Dynamo's order), it runs the compiled ``model`` on those at the positions ``users`` and returns its outputs
    as the graph does: as a ``form`` (``tuple`` or ``list``), or ``None``: the one output. A call whose weights
    (``weights``: position -> tensor compiled in) are other tensors, or changed in place, raises
    :class:`~tunewise.errors.InputError`."""

    def __init__(self, model, users: list[int], weights: Mapping, *, form: type | None = tuple):
        self.model = model
        self.users = users
        self.form = form
        self._weights = [(i, w.data_ptr(), w._version) for i, w in weights.items()]

    def __call__(self, *args):
        for i, pointer, version in self._weights:
            if args[i].data_ptr() != pointer or args[i]._version != version:
                raise InputError("the weights of a graph tunewise compiled have changed since: call "
                                 "torch._dynamo.reset() and compile the model again")
        outputs = self.model(*(args[i] for i in self.users))
        return outputs[0] if self.form is None else self.form(outputs)
