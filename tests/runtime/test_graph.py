"""Operator DAGs from torch.export on CPU, and stream plans for every zoo model."""

import functools
import itertools
import operator

import networkx as nx
import pytest
import torch
from torch import nn

from tunewise import zoo
from tunewise.errors import InputError, ModelImportError
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
