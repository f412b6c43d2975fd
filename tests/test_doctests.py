"""The docstrings of ``src/tunewise`` are short contracts, and every example in them runs.

Every module whose docstrings hold a ``>>>`` example is doctested here, so an example that stops being true
fails CI; examples are kept only where they are short and cheap (no TVM build, no tuning).
"""

import ast
import doctest
import importlib
import io
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "tunewise"
MAX_LINES = 15
_DEFINITIONS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _docstrings(path: pathlib.Path):
    """``(line, name, docstring)`` of every module, class and function docstring in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, _DEFINITIONS) and (doc := ast.get_docstring(node)) is not None:
            yield node.body[0].lineno, getattr(node, "name", "<module>"), doc


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


_FILES = sorted(PACKAGE.rglob("*.py"))
_WITH_EXAMPLES = [path for path in _FILES if any(line.lstrip().startswith(">>>")
                                                 for _, _, doc in _docstrings(path) for line in doc.splitlines())]


@pytest.mark.parametrize("module_name", [_module_name(path) for path in _WITH_EXAMPLES])
def test_examples_run(module_name):
    module = importlib.import_module(module_name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    for test in doctest.DocTestFinder(exclude_empty=True).find(module):
        runner.run(test, out=report.write)
    assert runner.tries > 0, f"{module_name}: no example ran (all skipped, or where doctest does not look)"
    assert runner.failures == 0, report.getvalue()


def test_no_example_is_skipped():
    skipped = [f"{path.relative_to(SRC)}:{line} {name}" for path in _FILES for line, name, doc in _docstrings(path)
               if "doctest: +SKIP" in doc]
    assert not skipped, "examples that never run: " + ", ".join(skipped)


def test_docstrings_are_short():
    long = [f"{path.relative_to(SRC)}:{line} {name} ({len(doc.splitlines())} lines)"
            for path in _FILES for line, name, doc in _docstrings(path) if len(doc.splitlines()) > MAX_LINES]
    assert not long, f"docstrings over {MAX_LINES} lines: " + ", ".join(long)
