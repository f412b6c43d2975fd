"""The package's modules import one another without cycles: every import, at module level or inside a
function, is an arrow, and the arrows form no loop."""

import ast
import pathlib

import networkx as nx

import tunewise

ROOT = pathlib.Path(tunewise.__file__).parent


def _module(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> nx.DiGraph:
    """``tunewise`` module -> the ``tunewise`` modules it imports; ``from package import name`` points at the
    submodule ``package.name`` where there is one, else at ``package``."""
    modules = {_module(path): path for path in ROOT.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                           for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph.add_edge(module, target)
    return graph


def test_the_modules_import_one_another_without_cycles():
    graph = _imports()
    assert graph.number_of_edges() > 100  # the walk sees the package's imports
    assert ("tunewise.tuning.session", "tunewise.tuning.ledger") in graph.edges
    cycles = list(nx.simple_cycles(graph))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles[:5])
