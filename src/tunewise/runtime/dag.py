"""The operator DAG of a PyTorch model, through torch.export, and its stream plan; CPU tensors suffice.

The model is exported with ``torch.export.export`` and lowered to functional ATen
(``run_decompositions({})``: in-place updates, batch-norm statistics included, become new values, and no
operator is decomposed further), so the data dependencies between operators are all the ordering there is.

Operators are the graph's ``call_function`` nodes, except ``operator.getitem``: that only picks one result of
a multi-result operator (batch norm, ``unbind``), launches nothing and is folded into its producer, so an
edge from a producer reaches the consumers of its results directly. View operators (``view``, ``permute``,
``transpose``) stay operators: they are cheap, but ``reshape`` and ``clone`` may copy, and keeping every one
keeps the dependencies exact.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator, Sequence

import networkx as nx
import torch
from torch import fx

from tunewise.errors import InputError, ModelImportError, message_line
from tunewise.runtime.streams import StreamPlan, plan_streams


def export_program(model: torch.nn.Module,
                   example_inputs: Sequence[torch.Tensor]) -> torch.export.ExportedProgram:
    """``model`` exported in its current train/eval mode, in functional ATen, for ``example_inputs``.

    The program of ``torch.export.export(model, example_inputs).run_decompositions({})``, traced once
    (``_export_functional``) and without the nodes' stack traces; through those two public calls when the
    one trace fails. Raises ``InputError`` if ``example_inputs`` is not a sequence of tensors and
    ``ModelImportError`` if torch.export cannot capture the model (data-dependent control flow, unsupported
    operators), which is then tried both ways.
    """
    inputs = check_inputs(example_inputs)
    with _no_stack_traces():
        try:
            return _export_functional(model, inputs)
        except Exception:  # the public route below reports whatever stops the model
            pass
        try:
            return torch.export.export(model, inputs).run_decompositions({})
        except Exception as err:  # torch.export raises many types, all meaning "cannot capture this model"
            message = message_line(err)
            raise ModelImportError(f"torch.export could not capture the model: {message}") from err


def _export_functional(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.export.ExportedProgram:
    """``torch.export.export(model, inputs).run_decompositions({})`` in one trace instead of two.

    ``export`` traces the model to the pre-dispatch IR; ``run_decompositions`` then unlifts that program into
    a module and traces it again through functionalisation, with every composite operator that the empty
    table preserves (``conv2d``, ``linear``, ...) overriding its decomposition. Here the model is traced once
    through functionalisation (torch.export's ``pre_dispatch=False`` route) under the same overrides, which
    gives the same graph, node names included, in a third to a half of the time. The names differ only where
    the model shares one parameter under two names (tied weights): the graph may read it through the other
    placeholder, the same tensor. Private torch API: ``export_program`` takes the public route whenever this
    one raises, and tests/runtime/test_graph.py compares the two routes on the zoo.
    """
    from torch.export import _trace
    from torch.export.exported_program import (
        _override_composite_implicit_decomp,
        _split_decomp_table_to_cia_and_python_decomp,
    )

    preserved, _ = _split_decomp_table_to_cia_and_python_decomp({})
    with _override_composite_implicit_decomp(preserved):
        return _trace._export(model, inputs, strict=False, pre_dispatch=False)


_STACK_TRACE_FLAG = "do_not_emit_stack_traces"
"""The ``torch.fx.config`` flag that turns the recording of nodes' stacks off (PyTorch 2.13; not in 2.11)."""


@contextlib.contextmanager
def _no_stack_traces() -> Iterator[None]:
    """Tracing without recording the Python stack of every node (``node.meta["stack_trace"]``, for error
    messages only): about a tenth of an export's time. The flag is global; it is restored on exit. A PyTorch
    without it records the stacks."""
    config = torch.fx.config
    if not hasattr(config, _STACK_TRACE_FLAG):
        yield
        return
    saved = getattr(config, _STACK_TRACE_FLAG)
    setattr(config, _STACK_TRACE_FLAG, True)
    try:
        yield
    finally:
        setattr(config, _STACK_TRACE_FLAG, saved)


def check_inputs(example_inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """``example_inputs`` as a tuple, or ``InputError`` if it is not a list or tuple of tensors."""
    if not isinstance(example_inputs, list | tuple) or not all(
            isinstance(x, torch.Tensor) for x in example_inputs):
        raise InputError("example inputs must be a tuple of tensors, one per positional argument of the "
                         "model")
    return tuple(example_inputs)


def is_operator(node: fx.Node) -> bool:
    """Whether ``node`` is an operator of the DAG: a ``call_function`` other than ``operator.getitem``."""
    return node.op == "call_function" and node.target is not operator.getitem


def producer(node: fx.Node) -> fx.Node | None:
    """The operator whose result ``node`` is (through any ``getitem``), or None for a graph input."""
    while node.op == "call_function" and node.target is operator.getitem:
        node = node.args[0]
    return node if is_operator(node) else None


def operator_dag(graph: fx.Graph) -> nx.DiGraph:
    """The operators of ``graph`` by node name, in graph order, with an edge for every data dependency."""
    dag = nx.DiGraph()
    for node in graph.nodes:
        if not is_operator(node):
            continue
        dag.add_node(node.name)
        for source in node.all_input_nodes:
            if (upstream := producer(source)) is not None:
                dag.add_edge(upstream.name, node.name)
    return dag


def plan_model(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
               merge: bool = False) -> StreamPlan:
    """The inference stream plan of ``model``: it is put in eval mode and exported for ``example_inputs``.

    Nodes of the plan are the node names of ``export_program(model, example_inputs).graph``.
    """
    return plan_exported(export_program(model.eval(), example_inputs), merge=merge)


def plan_exported(program: torch.export.ExportedProgram, merge: bool = False) -> StreamPlan:
    """The stream plan of an exported program (e.g. one ``torch.export.load`` read), lowered to functional ATen
    as :func:`export_program` lowers a model."""
    return plan_streams(operator_dag(program.run_decompositions({}).graph), merge=merge)
