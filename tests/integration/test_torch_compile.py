"""The torch.compile backend on tiny models: tuned graphs match eager PyTorch, graph breaks give one run per
graph in one store, a second process compiles from the store without tuning, and what tunewise cannot compile
runs eagerly."""

import contextlib
import importlib
import json
import os
import subprocess
import sys
import textwrap
import tomllib

import pytest

from tunewise import stores
from tunewise.errors import InputError
from tunewise.integration import torch_compile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TINY = {"max_trials": 2, "trials_per_slot": 2, "check_every": "never", "progress": False}
"""Options that keep tuning tiny: two trials a graph, no whole-model checks."""


def _graphs():
    sys.path.insert(0, HERE)
    try:
        return importlib.import_module("graphs")
    finally:
        sys.path.remove(HERE)


def test_the_package_declares_the_backend_under_torchs_entry_point_group():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        declared = tomllib.load(f)["project"]["entry-points"]["torch_dynamo_backends"]
    module, _, name = declared["tunewise"].partition(":")
    assert getattr(importlib.import_module(module), name) is torch_compile.backend


def test_options_are_settings_by_name_and_an_unknown_one_is_refused(tmp_path):
    chosen = torch_compile.parse_options({"time_budget": "90s", "scheduler": "round-robin", "seed": 3,
                                          "output": str(tmp_path)})
    assert chosen.settings.budget.time_budget == 90 and chosen.settings.budget.max_trials is None
    assert chosen.settings.scheduler == "round-robin" and chosen.settings.seed == 3
    assert chosen.output == str(tmp_path) and chosen.store is None
    patience = torch_compile.parse_options({"patience": 8}).settings.budget  # the default budget's limits kept
    assert patience.patience == 8 and patience.max_trials is not None
    assert torch_compile.parse_options(None).output == torch_compile.default_folder()
    with pytest.raises(InputError, match=r"unknown tunewise option budget_seconds; valid: store, .*time_budget"):
        torch_compile.parse_options({"budget_seconds": 60})
    with pytest.raises(InputError, match="source"):
        torch_compile.parse_options({"source": "tiny-mlp"})
    with pytest.raises(InputError, match="bad time budget 'soon'"):
        torch_compile.parse_options({"time_budget": "soon"})
    with pytest.raises(InputError, match="no modes"):
        torch_compile.backend(None, [], mode="max-autotune")


def test_the_default_folder_follows_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("TUNEWISE_CACHE_DIR", str(tmp_path))
    assert torch_compile.default_folder() == str(tmp_path / "torch-compile")
    assert torch_compile.default_store() == f"sqlite:///{tmp_path}/torch-compile/tunewise.db"
    monkeypatch.setenv("TUNEWISE_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert torch_compile.default_folder() == str(tmp_path / "xdg" / "tunewise" / "torch-compile")


def _recording(made: list):
    """The backend, each compiled graph it returns appended to ``made``."""

    def spied(gm, example_inputs, **kwargs):
        made.append(torch_compile.backend(gm, example_inputs, **kwargs))
        return made[-1]

    return spied


@pytest.fixture(scope="module")
def compiled_branching(tmp_path_factory):
    """``(options, compiled graphs, output, eager output)`` of :class:`graphs.Branching` compiled by the backend
    (tuned: two trials a graph) into a store of its own."""
    import torch

    folder = tmp_path_factory.mktemp("torch-compile")
    options = {**TINY, "store": f"sqlite:///{folder}/tunewise.db", "output": str(folder / "artifacts")}
    made = []
    spied = _recording(made)
    model, x = _graphs().branching()
    torch._dynamo.reset()
    with torch.no_grad():
        y = torch.compile(model, backend=spied, options=options, dynamic=False)(x)
        want = model(x)
    return options, made, y, want


@pytest.mark.tvm
def test_each_graph_of_a_graph_break_is_tuned_as_a_run_of_one_store_and_matches_eager(compiled_branching):
    import torch

    options, made, y, want = compiled_branching
    assert isinstance(y, torch.Tensor)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    assert len(made) == 2 and all(isinstance(g, torch_compile.CompiledGraph) for g in made)
    with contextlib.closing(stores.create(options["store"], read_only=True)) as store:
        runs = store.get_runs()
        assert [r.model for r in runs] == [g.model.metadata["model"] for g in made]
        assert len({r.model for r in runs}) == 2 and all(r.model.startswith(torch_compile.PREFIX) for r in runs)
        assert all(r.status == stores.FINISHED and store.get_tasks(r.id) for r in runs)
        assert len(store.get_trials(runs[0].id)) == 2 and len(store.get_trials(runs[1].id)) == 2
    for graph in made:  # the artifacts, each in the output folder under the graph's name
        assert os.path.dirname(graph.model.library) == os.path.join(options["output"], graph.model.metadata["model"])


@pytest.mark.tvm
def test_a_compiled_graph_is_loaded_from_its_artifact_and_checks_its_weights(compiled_branching):
    import torch

    options, made, _, want = compiled_branching
    again = []
    spied = _recording(again)
    model, x = _graphs().branching()
    torch._dynamo.reset()
    with contextlib.closing(stores.create(options["store"], read_only=True)) as store:
        runs = len(store.get_runs())
    with torch.no_grad():
        compiled = torch.compile(model, backend=spied, options=options, dynamic=False)
        torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)
        assert [g.model.library for g in again] == [g.model.library for g in made]  # the artifacts, loaded
        model.fc2.weight.add_(1.0)  # in place: Dynamo calls the same graphs, whose constants are stale now
        with pytest.raises(InputError, match="weights of a graph tunewise compiled have changed"):
            compiled(x)
    with contextlib.closing(stores.create(options["store"], read_only=True)) as store:
        assert len(store.get_runs()) == runs
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def second_process(compiled_branching, tmp_path_factory):
    """What a new Python process printed that compiled :class:`graphs.Branching` with ``backend="tunewise"`` (found
    through the entry point the package declares) from the first one's store into a new artifact folder: the
    seconds its first call took, and its outputs' largest difference from eager; with the store's trials before."""
    options, _, _, _ = compiled_branching
    folder = tmp_path_factory.mktemp("second-process")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        declared = tomllib.load(f)["project"]["entry-points"]["torch_dynamo_backends"]
    info = folder / "tunewise_backend-0.dist-info"  # the package's declared entry points, installed here
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tunewise-backend\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[torch_dynamo_backends]\n" + "".join(
        f"{name} = {value}\n" for name, value in declared.items()))
    again = {**options, "output": str(folder / "artifacts")}
    script = textwrap.dedent(f"""
        import json, time
        import torch
        import graphs
        options = {again!r}
        model, x = graphs.branching()
        with torch.no_grad():
            compiled = torch.compile(model, backend="tunewise", options=options, dynamic=False)
            start = time.perf_counter()
            y = compiled(x)
            seconds = time.perf_counter() - start
            print(json.dumps({{"seconds": seconds, "error": float((y - model(x)).abs().max())}}))
    """)
    with contextlib.closing(stores.create(options["store"], read_only=True)) as store:
        before = (store.count_trials(), len(store.get_runs()))
    path = os.pathsep.join([str(folder), HERE, *os.environ.get("PYTHONPATH", "").split(os.pathsep)])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": path}, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), before, options, folder


@pytest.mark.tvm
def test_a_second_process_compiles_the_graphs_from_the_store_without_tuning(second_process):
    printed, (trials, runs), options, folder = second_process
    assert printed["error"] < 1e-5
    with contextlib.closing(stores.create(options["store"], read_only=True)) as store:
        assert (store.count_trials(), len(store.get_runs())) == (trials, runs)  # nothing measured, no run made
        names = [r.model for r in store.get_runs()]
    assert sorted(os.listdir(folder / "artifacts")) == sorted(names)  # compiled again, from the records


@pytest.mark.tvm
@pytest.mark.timing
def test_a_second_process_compiles_from_the_store_in_seconds(second_process):
    printed, _, _, _ = second_process
    assert printed["seconds"] < 20


@pytest.mark.tvm
def test_a_graph_with_an_operator_tunewise_cannot_import_runs_eagerly_with_a_warning(tmp_path):
    import torch

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model, x = _graphs().LogGamma().eval(), torch.randn(2, 8)
    torch._dynamo.reset()
    options = {**TINY, "store": f"sqlite:///{tmp_path}/tunewise.db", "output": str(tmp_path / "artifacts")}
    with torch.no_grad(), pytest.warns(UserWarning, match=r"runs a graph of \d+ operators eagerly: .*lgamma"):
        y = torch.compile(model, backend=torch_compile.backend, options=options, dynamic=False)(x)
    with torch.no_grad():
        torch.testing.assert_close(y, model(x))
    with contextlib.closing(stores.create(options["store"], read_only=True)) as store:
        assert store.get_runs() == []
    torch._dynamo.reset()


def test_a_graph_that_needs_gradients_is_refused_in_one_line(tmp_path):
    import torch

    model = torch.nn.Linear(4, 2)
    torch._dynamo.reset()
    options = {**TINY, "store": f"sqlite:///{tmp_path}/tunewise.db", "output": str(tmp_path)}
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as caught:
        torch.compile(model, backend=torch_compile.backend, options=options)(torch.randn(3, 4))
    assert isinstance(caught.value.inner_exception, InputError)
    assert "compiles graphs for inference, and this one needs gradients" in str(caught.value.inner_exception)
    assert "\n" not in str(caught.value.inner_exception)
    torch._dynamo.reset()


def test_a_graph_with_dynamic_shapes_runs_eagerly_with_a_warning(tmp_path):
    import torch

    torch._dynamo.reset()
    options = {**TINY, "store": f"sqlite:///{tmp_path}/tunewise.db", "output": str(tmp_path)}
    compiled = torch.compile(lambda x: torch.relu(x) * 2, backend=torch_compile.backend, options=options,
                             dynamic=True)
    with torch.no_grad(), pytest.warns(UserWarning, match="eagerly: .*compile with dynamic=False"):
        y = compiled(torch.randn(3, 4))
    assert y.shape == (3, 4)
    torch._dynamo.reset()


def test_the_backend_names_a_graph_by_what_it_computes():
    import torch

    model, x = _graphs().branching()
    graph = torch.fx.symbolic_trace(model.fc1)
    first = torch_compile.exportable(graph, {})
    named = torch_compile.graph_name(first, (x,), "llvm", "none")
    assert named == torch_compile.graph_name(torch_compile.exportable(graph, {}), (x,), "llvm", "none")
    assert named.startswith(torch_compile.PREFIX) and len(named) == len(torch_compile.PREFIX) + 16
    assert named != torch_compile.graph_name(first, (x[:2],), "llvm", "none")  # another shape
    assert named != torch_compile.graph_name(first, (x,), "llvm", "fold-bn")  # another graph level
    with torch.no_grad():
        model.fc1.weight[0, 0] += 1
    assert named != torch_compile.graph_name(torch_compile.exportable(graph, {}), (x,), "llvm", "none")
