"""Nimble's ahead-of-time runtime: a model's operators on several CUDA streams, captured into one CUDA graph.

Kwon et al., "Nimble: Lightweight and Parallel GPU Task Scheduling for Deep Learning", NeurIPS 2020. Ahead
of time, the model is exported, its operators are assigned to streams (``streams.plan_streams``), it is run a
few times on a side stream to warm up, and one forward pass is captured into a single ``torch.cuda.CUDAGraph``
whose side streams fork from the capturing stream and join it before capture ends. A call then only copies
its inputs into the graph's fixed input buffers and replays the graph.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx, nn
from torch.export.graph_signature import InputKind, OutputKind
from torch.utils import _pytree as pytree

from tunewise.errors import InputError, ModelImportError
from tunewise.runtime.dag import check_inputs, export_program, is_operator, operator_dag, producer
from tunewise.runtime.streams import Fork, Join, Launch, Record, StreamPlan, Wait, plan_streams

FALLBACKS = (None, "cpu")


def _batch_norm_inference(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                          running_mean: torch.Tensor, running_var: torch.Tensor, momentum: float,
                          eps: float) -> tuple[torch.Tensor]:
    """The normalised output of ``aten._native_batch_norm_legit_no_training`` through ``torch.batch_norm``,
    which PyTorch hands to cuDNN's inference kernel where cuDNN takes the input; the exported operator always
    runs PyTorch's own kernels."""
    return (torch.batch_norm(x, weight, bias, running_mean, running_var, False, momentum, eps,
                             torch.backends.cudnn.enabled),)


# exported operators launched as another call computing the same first result, when only that one is read
FIRST_RESULT_KERNELS = {torch.ops.aten._native_batch_norm_legit_no_training.default: _batch_norm_inference}


class StreamedModule(nn.Module):
    """Runs ``model``'s exported operators on the streams of its plan, ordered by the plan's events.

    The model is exported once, in its mode at construction and for the shapes and dtypes of ``example_inputs``;
    calls must keep both (a caller holding that export passes it as ``program``, unchecked). Parameters and
    buffers are looked up in ``model`` at every call, so gradients reach them; buffers the model updates are
    written back on the calling stream after every stream has joined it. A call drops each intermediate once its
    last reader is issued (``reuse_memory=False`` keeps them to the end of the call). An operator of
    ``FIRST_RESULT_KERNELS`` whose other results nobody reads is launched as its replacement there.

    Streams and events are those of the example inputs' device: on CUDA, operators on different streams overlap;
    on CPU they run one after another in issue order. A call issues work on the caller's current stream (stream
    0) and on side streams that fork from it and join it, so it can be captured into a CUDA graph; a tensor read
    on another stream than its maker's is recorded on the reader's, so its memory is reused only once every
    stream reading it is done.
    """

    def __init__(self, model: nn.Module, example_inputs: Sequence[torch.Tensor], *, merge: bool = False,
                 program: torch.export.ExportedProgram | None = None, reuse_memory: bool = True):
        super().__init__()
        self.model = model
        inputs = check_inputs(example_inputs)
        program = export_program(model, inputs) if program is None else program
        _check_supported(program)
        self.plan: StreamPlan = plan_streams(operator_dag(program.graph), merge=merge)
        self.device = _device_of(model, inputs)
        self._steps = self.plan.program()
        self._nodes = {node.name: node for node in program.graph.nodes}
        self._results: dict[str, list[fx.Node]] = {name: [] for name in self.plan.order}
        for node in program.graph.nodes:
            if node.op == "call_function" and not is_operator(node):
                self._results[producer(node).name].append(node)
        self._kernels = {name: FIRST_RESULT_KERNELS.get(node.target, node.target)
                         if all(item.args[1] == 0 for item in self._results[name]) else node.target
                         for name, node in self._nodes.items() if is_operator(node)}
        self._foreign = _foreign_inputs(program.graph, self.plan.stream_of())
        self._dropped = (_dropped_after(program.graph, self.plan.order) if reuse_memory
                         else {name: [] for name in self.plan.order})
        self._constants = dict(program.constants)
        placeholders = [node for node in program.graph.nodes if node.op == "placeholder"]
        self._placeholders = list(zip(placeholders, program.graph_signature.input_specs, strict=True))
        self._outputs = list(zip(program.graph_signature.output_specs, program.graph.output_node().args[0],
                                 strict=True))
        self._out_spec = program.call_spec.out_spec
        self._updated = {spec.target for spec, _ in self._outputs if spec.kind == OutputKind.BUFFER_MUTATION}
        streams = torch.get_device_module(self.device)
        self._side_streams = [streams.Stream() for _ in self.plan.streams[1:]]
        self._events = [streams.Event() for _ in self.plan.syncs]

    def forward(self, *inputs: torch.Tensor) -> Any:
        """The model's outputs for ``inputs`` (as many tensors as the example inputs, same shapes)."""
        env = self._bind(inputs)
        streams = torch.get_device_module(self.device)
        main = streams.current_stream()
        stream = [main, *self._side_streams]
        for step in self._steps:
            match step:
                case Launch(node=name, stream=s):
                    with streams.stream(stream[s]):
                        self._launch(name, env, stream[s])
                case Record(sync=i, stream=s):
                    self._events[i].record(stream[s])
                case Wait(sync=i, stream=s):
                    self._events[i].wait(stream[s])
                case Fork(stream=s):
                    stream[s].wait_stream(main)
                case Join(stream=s):
                    main.wait_stream(stream[s])
        buffers = dict(self.model.named_buffers(remove_duplicate=False))
        with torch.no_grad():
            for spec, node in self._outputs:
                if spec.kind == OutputKind.BUFFER_MUTATION:
                    buffers[spec.target].copy_(env[node])
        user = [fx.node.map_arg(node, env.__getitem__) for spec, node in self._outputs
                if spec.kind == OutputKind.USER_OUTPUT]
        return pytree.tree_unflatten(user, self._out_spec)

    def _bind(self, inputs: Sequence[torch.Tensor]) -> dict[fx.Node, Any]:
        users = sum(spec.kind == InputKind.USER_INPUT for _, spec in self._placeholders)
        if len(inputs) != users:
            raise InputError(f"the model takes {users} input tensors, got {len(inputs)}")
        tensors = {**dict(self.model.named_parameters(remove_duplicate=False)),
                   **dict(self.model.named_buffers(remove_duplicate=False)), **self._constants}
        user = iter(inputs)
        env = {}
        for node, spec in self._placeholders:
            if spec.kind == InputKind.USER_INPUT:
                env[node] = next(user)
            elif spec.target in self._updated:  # a copy: autograd may save it, and the buffer is overwritten
                env[node] = tensors[spec.target].detach().clone()
            else:
                env[node] = tensors[spec.target]
        return env

    def _launch(self, name: str, env: dict[fx.Node, Any], stream: Any) -> None:
        node = self._nodes[name]
        if self.device.type == "cuda":
            for source in self._foreign[name]:
                if isinstance(tensor := env[source], torch.Tensor) and tensor.device.type == "cuda":
                    tensor.record_stream(stream)
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), env.__getitem__)
        env[node] = self._kernels[name](*args, **kwargs)
        for item in self._results[name]:  # getitem nodes, in graph order, so nested ones find their source
            env[item] = operator.getitem(env[item.args[0]], item.args[1])
        for done in self._dropped[name]:
            del env[done]


class AotEngine:
    """A model's forward pass as one CUDA graph over the streams of its plan; call it like the model.

    Built by ``aot()``. A call copies its inputs (same shapes and dtypes as the example inputs, any device)
    into the graph's input buffers and replays the graph on the current stream. It returns the outputs as
    fresh clones, or with ``clone_outputs=False`` the graph's own output buffers, which the next call
    overwrites in place: use that only when each result is consumed before the next call. Not thread-safe.
    """

    def __init__(self, module: StreamedModule, example_inputs: Sequence[torch.Tensor], *,
                 clone_outputs: bool = True, warmup_runs: int = 3):
        self.module = module
        self.clone_outputs = clone_outputs
        self._inputs = tuple(x.detach().to(module.device).clone() for x in example_inputs)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad():
            with torch.cuda.stream(side):
                for _ in range(warmup_runs):
                    module(*self._inputs)
            torch.cuda.current_stream().wait_stream(side)
            self._graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self._graph):
                outputs = module(*self._inputs)
        self._outputs, self._out_spec = pytree.tree_flatten(outputs)

    @property
    def plan(self) -> StreamPlan:
        """The stream plan the graph was captured with."""
        return self.module.plan

    def __call__(self, *inputs: torch.Tensor) -> Any:
        if len(inputs) != len(self._inputs):
            raise InputError(f"the engine takes {len(self._inputs)} input tensors, got {len(inputs)}")
        for i, (buffer, x) in enumerate(zip(self._inputs, inputs, strict=True)):
            if not isinstance(x, torch.Tensor) or x.shape != buffer.shape or x.dtype != buffer.dtype:
                got = f"{x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
                raise InputError(f"input {i} must be {buffer.dtype} {tuple(buffer.shape)} like the example "
                                 f"input, got {got}")
            buffer.copy_(x)
        self._graph.replay()
        outputs = [o.clone() if self.clone_outputs and isinstance(o, torch.Tensor) else o
                   for o in self._outputs]
        return pytree.tree_unflatten(outputs, self._out_spec)


class EagerEngine:
    """The model run unchanged, in eval mode and without autograd: ``aot(..., fallback="cpu")``'s engine
    without CUDA."""

    def __init__(self, model: nn.Module):
        self.model = model.eval()

    def __call__(self, *inputs: torch.Tensor) -> Any:
        with torch.no_grad():
            return self.model(*inputs)


def aot(model: nn.Module, example_inputs: Sequence[torch.Tensor], *, clone_outputs: bool = True,
        merge: bool = False, fallback: str | None = None) -> AotEngine | EagerEngine:
    """``model`` (put in eval mode) prepared ahead of time for inference on the GPU: an ``AotEngine``.

    ``model`` must be on the current CUDA device; ``example_inputs`` (one tensor per positional argument, any
    device) fix the shapes and dtypes of every later call. ``merge`` merges stream chains into fewer streams
    (see ``streams``). Without CUDA, ``fallback="cpu"`` returns an ``EagerEngine`` that runs the model
    unchanged, and the default raises ``InputError``. ``ModelImportError`` if torch.export cannot capture it.
    """
    inputs = check_inputs(example_inputs)
    if not _cuda_or_fallback(fallback):
        return EagerEngine(model)
    device = _cuda_device(model)
    inputs = tuple(x.to(device) for x in inputs)
    return AotEngine(StreamedModule(model.eval(), inputs, merge=merge), inputs, clone_outputs=clone_outputs)


def aot_training(model: nn.Module, example_inputs: Sequence[torch.Tensor], *, merge: bool = False,
                 fallback: str | None = None) -> nn.Module:
    """A stand-in for ``model`` (put in train mode) in training steps whose forward and backward passes each
    replay one CUDA graph.

    The forward graph runs the multi-stream plan of the model exported in train mode; the backward graph is
    captured from autograd over it, and autograd runs each backward operator on the stream of its forward
    operator, so the backward pass is multi-stream too. ``torch.cuda.make_graphed_callables`` does the rest:
    warm-up (three forward and backward passes on the example inputs, which move batch-norm statistics),
    both captures, and the ``torch.autograd.Function`` that replays them. Gradients accumulate into the
    parameters' ``.grad`` as usual, and an optimizer may update parameters in place between steps. Outputs
    are the forward graph's buffers, overwritten by the next call. The returned module replays the graphs only
    in train mode: use ``aot()`` for inference. ``example_inputs`` must have the ``requires_grad`` of the real
    inputs; parameters that no output depends on get no gradient. Without CUDA, ``fallback="cpu"`` returns
    ``model`` itself and the default raises ``InputError``.
    """
    inputs = check_inputs(example_inputs)
    if not _cuda_or_fallback(fallback):
        return model.train()
    device = _cuda_device(model)
    # copies: the graphs' input buffers are written by every call, and must not be the caller's tensors
    inputs = tuple(x.detach().to(device).clone().requires_grad_(x.requires_grad) for x in inputs)
    streamed = StreamedModule(model.train(), inputs, merge=merge)
    return torch.cuda.make_graphed_callables(streamed, inputs, allow_unused_input=True)


def _cuda_or_fallback(fallback: str | None) -> bool:
    """True if CUDA is there; False if not and ``fallback`` is "cpu"; else ``InputError``."""
    if fallback not in FALLBACKS:
        raise InputError(f"unknown fallback {fallback!r}; choose None (raise without CUDA) or 'cpu'")
    if torch.cuda.is_available():
        return True
    if fallback is None:
        raise InputError("CUDA is not available: the ahead-of-time runtime captures CUDA graphs; pass "
                         "fallback='cpu' to run the model unchanged instead")
    return False


def _cuda_device(model: nn.Module) -> torch.device:
    """The current CUDA device, or ``InputError`` if ``model`` has tensors elsewhere."""
    device = torch.device("cuda", torch.cuda.current_device())
    elsewhere = {str(t.device) for t in [*model.parameters(), *model.buffers()] if t.device != device}
    if elsewhere:
        raise InputError(f"the model must be on the current CUDA device {device} "
                         f"(model.to({str(device)!r})); it has tensors on {', '.join(sorted(elsewhere))}")
    return device


def _foreign_inputs(graph: fx.Graph, stream_of: dict[str, int]) -> dict[str, list[fx.Node]]:
    """For each operator, its inputs made on another stream (graph inputs count as the capture stream's).

    The caching allocator reuses a freed tensor's memory for the next allocation on the stream that made it,
    without waiting for other streams. Forward intermediates outlive the call when autograd saves them, and
    backward operators run on their forward operators' streams, so a tensor read on another stream is
    recorded on that stream (``record_stream``): its memory is reused only once that stream's work is done,
    and within a CUDA graph capture only after the capture ends.
    """
    foreign = {}
    for node in graph.nodes:
        if is_operator(node):
            here = stream_of[node.name]
            foreign[node.name] = [source for source in node.all_input_nodes
                                  if stream_of.get(getattr(producer(source), "name", None), 0) != here]
    return foreign


def _dropped_after(graph: fx.Graph, order: Sequence[str]) -> dict[str, list[fx.Node]]:
    """For each operator, the values no operator issued after it reads: its inputs that it reads last, and
    results of its own that nobody reads (a batch norm's tuple once its items are picked). Graph inputs and the
    graph's outputs are never dropped."""
    last_reader: dict[fx.Node, str] = {}
    nodes = {node.name: node for node in graph.nodes}
    for name in order:
        for source in nodes[name].all_input_nodes:
            last_reader[source] = name
    kept = set(graph.output_node().all_input_nodes)
    dropped: dict[str, list[fx.Node]] = {name: [] for name in order}
    for node in graph.nodes:
        if node.op != "call_function" or node in kept:
            continue
        if node in last_reader:
            dropped[last_reader[node]].append(node)
        else:  # read by no operator: a result tuple, or a getitem nobody reads
            dropped[producer(node).name].append(node)
    return dropped


def _device_of(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.device:
    """Where the operators run: the device of the inputs, else of the model's parameters, else the CPU."""
    tensors = [*inputs, *model.parameters()]
    return tensors[0].device if tensors else torch.device("cpu")


def _check_supported(program: torch.export.ExportedProgram) -> None:
    """``ModelImportError`` unless the graph has only placeholders, calls and its output, its inputs are
    tensors, parameters, buffers and constants, and its only side effects are buffer updates."""
    inputs = {InputKind.USER_INPUT, InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR}
    outputs = {OutputKind.USER_OUTPUT, OutputKind.BUFFER_MUTATION}
    signature = program.graph_signature
    kinds = [spec.kind.name.lower() for spec in signature.input_specs if spec.kind not in inputs]
    kinds += [spec.kind.name.lower() for spec in signature.output_specs if spec.kind not in outputs]
    kinds += [f"{node.op} node" for node in program.graph.nodes
              if node.op not in ("placeholder", "call_function", "output")]
    if kinds:
        raise ModelImportError(f"the runtime does not support exported {kinds[0]} "
                               "(input mutations, custom objects, effect tokens, control-flow submodules)")
