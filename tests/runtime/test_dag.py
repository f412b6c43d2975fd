"""Operator DAGs from torch.export on CPU, and stream plans for every zoo model."""

import functools
import itertools
import operator
import re

import networkx as nx
import pytest
import torch
from torch import nn

from tunewise import zoo
from tunewise.errors import InputError, ModelImportError
from tunewise.runtime import dag as dags
from tunewise.runtime import export_program, operator_dag, plan_model, plan_streams


@functools.cache
def zoo_graph(name: str) -> torch.fx.Graph:
    """The exported graph of zoo model ``name``, built on the meta device: plans need no weights or data."""
    entry = zoo.MODELS[name]
    with torch.device("meta"):
        model = entry.build().eval()
        x = torch.zeros(entry.input_shape, dtype=torch.long if entry.input_kind == "tokens" else torch.float)
    return export_program(model, (x,)).graph


class Split(nn.Module):
    def forward(self, x):
        a, b = torch.unbind(torch.relu(x), 0)
        return torch.sin(a) + torch.cos(b)


class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.left, self.right = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.left(x)) * torch.tanh(self.right(x))


def test_getitem_is_folded_into_its_producer():
    dag = operator_dag(export_program(Split(), (torch.randn(2, 3),)).graph)
    assert list(dag.nodes) == ["relu", "unbind", "sin", "cos", "add"]
    assert set(dag.edges) == {("relu", "unbind"), ("unbind", "sin"), ("unbind", "cos"), ("sin", "add"),
                              ("cos", "add")}


def test_independent_branches_get_their_own_streams():
    plan = plan_model(Branches(), (torch.randn(1, 8),))
    assert plan.width == 2 and len(plan.streams) == 2
    assert [(sync.src, sync.dst) for sync in plan.syncs] == [("tanh", "mul")]  # linear_1 reads only the input
    assert plan.order == ("linear", "relu", "linear_1", "tanh", "mul")


@pytest.mark.parametrize("name", zoo.names())
def test_zoo_dag_has_every_operator_and_data_dependency(name):
    graph = zoo_graph(name)
    dag = operator_dag(graph)
    operators = [node for node in graph.nodes
                 if node.op == "call_function" and node.target is not operator.getitem]
    assert list(dag.nodes) == [node.name for node in operators]
    for node in operators:
        for source in node.all_input_nodes:
            while source.op == "call_function" and source.target is operator.getitem:
                source = source.args[0]
            if source.op == "call_function":
                assert dag.has_edge(source.name, node.name)
    assert nx.is_directed_acyclic_graph(dag)


WIDTHS = {"resnet18": 2, "mobilenetv2": 1, "squeezenet1.1": 2, "vgg11": 1, "transformer": 1,
          "inception-cells": 4, "tiny-cnn": 1, "tiny-mlp": 1}


@pytest.mark.parametrize("name, width", WIDTHS.items())
def test_zoo_plans(name, width):
    dag = operator_dag(zoo_graph(name))
    plain, merged = plan_streams(dag), plan_streams(dag, merge=True)
    assert plain.width == merged.width == width
    assert len(merged.streams) == width <= len(plain.streams)
    assert len(merged.syncs) == len(plain.syncs)
    for plan in (plain, merged):
        assert sorted(node for nodes in plan.streams for node in nodes) == sorted(dag.nodes)
        for nodes in plan.streams:
            assert all(nx.has_path(dag, u, v) for u, v in itertools.pairwise(nodes))
        assert plan.describe().startswith(f"operators: {dag.number_of_nodes()}, streams: {len(plan.streams)}")


def test_plan_model_puts_the_model_in_eval_mode():
    model, inputs = zoo.get("tiny-cnn")
    plan = plan_model(model.train(), inputs, merge=True)
    assert not model.training
    assert plan.merged and plan.order[0] == "conv2d"


def test_non_tensor_inputs_are_an_input_error():
    with pytest.raises(InputError, match="tuple of tensors"):
        plan_model(Branches(), ([1.0] * 8,))
    with pytest.raises(InputError, match="tuple of tensors"):
        plan_model(Branches(), torch.randn(1, 8))


def test_unexportable_model_is_a_model_import_error():
    class DataDependent(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(ModelImportError, match="torch.export could not capture the model"):
        plan_model(DataDependent(), (torch.randn(3),))


def described(program: torch.export.ExportedProgram, model: nn.Module) -> tuple:
    """Everything about ``program`` that the runtime reads: each node's kind, target, name and arguments, with
    parameters, buffers and constants named by the tensor they are (a tied weight is one tensor under two
    names), and the kinds and targets of the inputs and outputs."""
    tensors = {**dict(model.named_parameters(remove_duplicate=False)),
               **dict(model.named_buffers(remove_duplicate=False)), **program.constants}
    specs = {spec.arg.name: spec for spec in program.graph_signature.input_specs}

    def name(node: torch.fx.Node) -> str:
        spec = specs.get(node.name)
        return f"tensor {id(tensors[spec.target])}" if spec is not None and spec.target is not None else node.name

    nodes = [(node.op, str(node.target), name(node), str(torch.fx.node.map_arg((node.args, node.kwargs), name)))
             for node in program.graph.nodes]
    return (nodes, [(spec.kind, id(tensors[spec.target]) if spec.target else None)
                    for spec in program.graph_signature.input_specs],
            [(spec.kind, spec.target) for spec in program.graph_signature.output_specs])


@pytest.mark.parametrize("name, train", [("tiny-cnn", False), ("tiny-cnn", True), ("tiny-gpt", False),
                                         ("tiny-gpt", True), ("transformer", False), ("squeezenet1.1", False),
                                         ("inception-cells", True)])
def test_the_one_trace_export_equals_export_then_decompositions(name, train):
    # batch norms (inference and training), dropout, tied weights, reshapes that copy, flatten
    entry = zoo.MODELS[name]
    with torch.device("meta"):
        model = entry.build().train(train)
        x = torch.zeros(entry.input_shape, dtype=torch.long if entry.input_kind == "tokens" else torch.float)
    public = torch.export.export(model, (x,)).run_decompositions({})
    assert described(dags._export_functional(model, (x,)), model) == described(public, model)


def test_export_takes_the_public_route_when_the_one_trace_route_fails(monkeypatch):
    def fails(model, inputs):
        raise RuntimeError("not this way")

    model, x = Branches(), torch.randn(1, 8)
    expected = described(export_program(model, (x,)), model)
    monkeypatch.setattr(dags, "_export_functional", fails)
    assert described(export_program(model, (x,)), model) == expected


@pytest.mark.parametrize("flag", [False, True])
def test_export_records_no_stack_traces_and_restores_the_flag(monkeypatch, flag):
    monkeypatch.setattr(torch.fx.config, "do_not_emit_stack_traces", flag)
    program = export_program(Branches(), (torch.randn(1, 8),))
    assert not any(node.stack_trace for node in program.graph.nodes)
    assert torch.fx.config.do_not_emit_stack_traces is flag
    with pytest.raises(InputError, match="example inputs must be a tuple of tensors"):
        export_program(Branches(), [1.0])
    with pytest.raises(ModelImportError, match=re.escape("torch.export could not capture the model: ")):
        export_program(nn.Linear(3, 3), (torch.randn(2, 4),))
    assert torch.fx.config.do_not_emit_stack_traces is flag


def test_export_works_on_a_pytorch_without_the_stack_trace_flag(monkeypatch):
    """PyTorch 2.11 (a GPU machine's) has no ``torch.fx.config.do_not_emit_stack_traces``: its stacks are
    recorded, and the program is the same."""
    model, x = Branches(), torch.randn(1, 8)
    expected = described(export_program(model, (x,)), model)
    monkeypatch.setattr(dags, "_STACK_TRACE_FLAG", "a_flag_this_pytorch_lacks")
    program = export_program(model, (x,))
    assert described(program, model) == expected and any(node.stack_trace for node in program.graph.nodes)
