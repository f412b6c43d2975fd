"""The multi-stream module on CPU (its streams are no-ops there), the CUDA fallbacks, and GPU-only tests."""

import copy
import itertools

import networkx as nx
import pytest
import torch
from torch import nn

import tunewise.runtime
from tunewise import zoo
from tunewise.errors import InputError, ModelImportError
from tunewise.runtime import AotEngine, EagerEngine, StreamedModule, aot, aot_training, plan_streams
from tunewise.runtime.dag import export_program, operator_dag, producer

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class Cells(nn.Module):
    """Two small inception-style cells: parallel conv-bn-relu branches, so several streams and BN updates."""

    def __init__(self):
        super().__init__()
        self.cells = nn.ModuleList(
            nn.ModuleList(nn.Sequential(nn.Conv2d(8, 4, k, padding=k // 2), nn.BatchNorm2d(4), nn.ReLU())
                          for k in (1, 3))
            for _ in range(2))
        self.stem = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        x = self.stem(x)
        for branches in self.cells:
            x = torch.cat([branch(x) for branch in branches], 1)
        return x.mean((2, 3))


def new_input(name: str) -> torch.Tensor:
    return zoo.get(name, seed=1)[1][0]


def fewest_paths(dag: nx.DiGraph) -> int:
    """The fewest vertex-disjoint paths of the transitive reduction that cover ``dag``: the node count minus a
    maximum matching of the reduction's bipartite graph (Fulkerson), here with networkx's Eppstein matching."""
    reduced = nx.transitive_reduction(dag)
    bipartite = nx.Graph()
    tops = [("out", node) for node in dag]
    bipartite.add_nodes_from(tops)
    bipartite.add_edges_from((("out", u), ("in", v)) for u, v in reduced.edges)
    return dag.number_of_nodes() - len(nx.bipartite.eppstein_matching(bipartite, top_nodes=tops)) // 2


@pytest.mark.parametrize("name", ["tiny-cnn", "inception-cells", "transformer"])
def test_streamed_module_matches_eager_on_cpu(name):
    model, (x,) = zoo.get(name)
    streamed = StreamedModule(model, (x,))
    dag = operator_dag(export_program(model.eval(), (x,)).graph)
    reduced = nx.transitive_reduction(dag)
    # the streams are paths of the reduction covering every operator once, as few as any such cover can be
    assert sorted(node for stream in streamed.plan.streams for node in stream) == sorted(dag.nodes)
    assert all(reduced.has_edge(u, v) for stream in streamed.plan.streams for u, v in itertools.pairwise(stream))
    assert len(streamed.plan.streams) == fewest_paths(dag)
    with torch.no_grad():
        for inputs in (x, new_input(name)):
            torch.testing.assert_close(streamed(inputs), model(inputs))


def test_each_parallel_branch_gets_a_stream_of_its_own():
    # the stem and the first branch of each cell on the capture stream, the second branch of each on its own
    model, x = Cells().eval(), torch.randn(1, 3, 8, 8)
    plan = StreamedModule(model, (x,)).plan
    assert len(plan.streams) == 3 and [len(stream) for stream in plan.streams[1:]] == [3, 3]  # conv, bn, relu


def test_tensors_read_across_streams_are_the_inputs_made_on_another_stream():
    model, x = Cells().eval(), torch.randn(1, 3, 8, 8)
    streamed = StreamedModule(model, (x,))
    stream_of = streamed.plan.stream_of()
    # every cross-stream edge of the plan is a foreign read, and every foreign read comes from another stream
    for sync in streamed.plan.syncs:
        assert sync.src in [getattr(producer(node), "name", None) for node in streamed._foreign[sync.dst]]
    for name, sources in streamed._foreign.items():
        assert all(stream_of.get(getattr(producer(s), "name", None), 0) != stream_of[name] for s in sources)
    assert sum(map(len, streamed._foreign.values())) >= len(streamed.plan.syncs) > 0


@pytest.mark.parametrize("train", [False, True])
def test_each_intermediate_is_dropped_once_after_its_last_reader(train):
    model, x = Cells().train(train), torch.randn(2, 3, 8, 8)
    streamed = StreamedModule(model, (x,))
    graph = export_program(model, (x,)).graph
    position = {name: i for i, name in enumerate(streamed.plan.order)}
    outputs = set(graph.output_node().all_input_nodes)
    dropped = [(node.name, name) for name, nodes in streamed._dropped.items() for node in nodes]
    intermediates = [node.name for node in graph.nodes if node.op == "call_function" and node not in outputs]
    assert sorted(value for value, _ in dropped) == sorted(intermediates)
    for value, after in dropped:
        readers = [n.name for n in graph.nodes if n.name in position and value in map(str, n.all_input_nodes)]
        assert all(position[reader] <= position[after] for reader in readers)
        assert after in readers or not readers
    if train:  # batch-norm statistics are outputs, kept to the end to update the buffers
        assert len(outputs) > 1 and not any(node.name in dict(dropped) for node in outputs)


def test_without_memory_reuse_no_intermediate_is_dropped_and_the_outputs_are_the_same():
    model, x = Cells().eval(), torch.randn(1, 3, 8, 8)
    kept, reused = StreamedModule(model, (x,), reuse_memory=False), StreamedModule(model, (x,))
    assert not any(kept._dropped.values()) and any(reused._dropped.values())
    with torch.no_grad():
        torch.testing.assert_close(kept(x), model(x))


def test_merged_streams_match_eager_on_cpu():
    model, x = Cells().eval(), torch.randn(1, 3, 8, 8)
    streamed = StreamedModule(model, (x,), merge=True)
    assert len(streamed.plan.streams) == streamed.plan.width == 2
    with torch.no_grad():
        torch.testing.assert_close(streamed(x), model(x))


def test_streamed_module_runs_a_given_export(monkeypatch):
    model, x = Cells().eval(), torch.randn(1, 3, 8, 8)
    program = export_program(model, (x,))

    def no_export(*args):
        raise AssertionError("exported again")

    monkeypatch.setattr(tunewise.runtime.engine, "export_program", no_export)
    streamed = StreamedModule(model, (x,), program=program)
    assert streamed.plan == plan_streams(operator_dag(program.graph))
    with torch.no_grad():
        torch.testing.assert_close(streamed(x), model(x))


def test_inference_batch_norms_launch_torch_batch_norm_and_match_eager():
    model = Cells().train()
    with torch.no_grad():  # running statistics and affine parameters away from their identity defaults
        for step in range(3):
            model(torch.randn(4, 3, 8, 8) * (step + 2) + step)
        for bn in (m for m in model.modules() if isinstance(m, nn.BatchNorm2d)):
            bn.weight.uniform_(0.5, 2.0)
            bn.bias.uniform_(-1.0, 1.0)
    model.eval()
    x = torch.randn(1, 3, 8, 8)
    streamed = StreamedModule(model, (x,))
    batch_norm = torch.ops.aten._native_batch_norm_legit_no_training.default
    replaced = [name for name, node in streamed._nodes.items() if node.target is batch_norm]
    assert len(replaced) == 4
    assert all(streamed._kernels[name] is tunewise.runtime.engine.FIRST_RESULT_KERNELS[batch_norm]
               for name in replaced)
    with torch.no_grad():
        torch.testing.assert_close(streamed(x), model(x))


def test_training_batch_norms_launch_as_exported():
    streamed = StreamedModule(Cells().train(), (torch.randn(4, 3, 8, 8),))
    assert all(streamed._kernels[name] is node.target for name, node in streamed._nodes.items()
               if name in streamed._kernels)


def test_streamed_training_matches_eager_gradients_and_batch_norm_statistics():
    model = Cells().train()
    reference = copy.deepcopy(model)
    x = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    streamed = StreamedModule(model, (x,))
    assert len(streamed.plan.streams) > 1
    for step in range(2):
        streamed(x + step).square().sum().backward()
        reference(x + step).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    for (name, b), c in zip(model.named_buffers(), reference.buffers(), strict=True):
        torch.testing.assert_close(b, c, msg=name)


def test_streamed_module_checks_the_number_of_inputs():
    model, inputs = zoo.get("tiny-mlp")
    with pytest.raises(InputError, match="takes 1 input tensors, got 2"):
        StreamedModule(model, inputs)(*inputs, *inputs)


def test_input_mutation_is_not_supported():
    class Mutates(nn.Module):
        def forward(self, x):
            x.add_(1)
            return x * 2

    with pytest.raises(ModelImportError, match="user_input_mutation"):
        StreamedModule(Mutates(), (torch.randn(3),))


def test_aot_is_exported_by_the_package():
    assert tunewise.runtime.aot is aot and "aot_training" in tunewise.runtime.__all__


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_aot_without_cuda_is_an_input_error(no_cuda):
    model, inputs = zoo.get("tiny-mlp")
    with pytest.raises(InputError, match="CUDA is not available"):
        aot(model, inputs)
    with pytest.raises(InputError, match="CUDA is not available"):
        aot_training(model, inputs)


def test_cpu_fallback_runs_the_model_unchanged(no_cuda):
    model, (x,) = zoo.get("tiny-cnn")
    engine = aot(model.train(), (x,), fallback="cpu")
    assert isinstance(engine, EagerEngine) and engine.model is model and not model.training
    out = engine(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, model(x), rtol=0, atol=0)
    assert aot_training(model, (x,), fallback="cpu") is model and model.training


def test_unknown_fallback_is_an_input_error():
    model, inputs = zoo.get("tiny-mlp")
    with pytest.raises(InputError, match="unknown fallback 'gpu'"):
        aot(model, inputs, fallback="gpu")


@cuda
@pytest.mark.parametrize("name", ["inception-cells", "resnet18", "transformer", "squeezenet1.1"])
def test_aot_matches_eager_and_replays_new_inputs(name):
    model, (x,) = zoo.get(name)
    model = model.cuda()
    engine = aot(model, (x,))
    assert isinstance(engine, AotEngine)
    with torch.no_grad():
        for inputs in (x, new_input(name), x):
            torch.testing.assert_close(engine(inputs), model(inputs.cuda()), rtol=1e-3, atol=1e-3)


@cuda
def test_aot_uses_several_streams_and_can_return_its_buffers():
    model, (x,) = zoo.get("inception-cells")
    model = model.cuda()
    engine = aot(model, (x,), clone_outputs=False, merge=True)
    assert len(engine.plan.streams) == 4
    first = engine(x)
    expected = model(new_input("inception-cells").cuda()).detach()
    second = engine(new_input("inception-cells"))
    assert first.data_ptr() == second.data_ptr()
    torch.testing.assert_close(second, expected, rtol=1e-3, atol=1e-3)
    with pytest.raises(InputError, match="input 0 must be"):
        engine(torch.randn(2, 3, 64, 64))


@cuda
def test_aot_rejects_a_model_left_on_the_cpu():
    model, inputs = zoo.get("tiny-mlp")
    with pytest.raises(InputError, match="current CUDA device"):
        aot(model, inputs)


@cuda
@pytest.mark.parametrize("merge", [False, True])
def test_aot_training_matches_eager_gradients(merge):
    # in float64: a convolution's bias before a training-mode batch norm has a true gradient of zero, so in
    # float32 its gradients are rounding noise that differs between any two kernel sequences
    torch.manual_seed(0)
    model = Cells().cuda().double()
    reference = copy.deepcopy(model)
    x = torch.randn(4, 3, 8, 8, device="cuda", dtype=torch.float64)
    example = x.clone()
    graphed = aot_training(model, (x,), merge=merge)
    for step in range(2):
        for module in (model, reference):
            module.zero_grad(set_to_none=True)
        graphed(x + step).square().sum().backward()
        reference(x + step).square().sum().backward()
        scale = max(q.grad.abs().max().item() for q in reference.parameters())
        for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-7, atol=1e-9 * scale, msg=f"step {step}: {name}")
    torch.testing.assert_close(x, example, rtol=0, atol=0)  # the example input is not the graphs' buffer
