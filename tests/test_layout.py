"""The package's shape: a few modules at its top beside the stage packages, and no signature too wide to read."""

import ast
import pathlib

import tunewise

PACKAGE = pathlib.Path(tunewise.__file__).parent
MAX_TOP_MODULES = 12
MAX_PARAMETERS = 10
STAGES = ("importing", "lowering", "tuning", "delivery", "job")


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """How many parameters a caller can pass: every argument but a method's ``self`` or ``cls``."""
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    count = len(names) + (args.vararg is not None) + (args.kwarg is not None)
    return count - (1 if names and names[0] in ("self", "cls") else 0)


def test_the_top_holds_the_stages_and_a_few_modules():
    modules = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(modules) <= MAX_TOP_MODULES, modules
    assert all((PACKAGE / stage / "__init__.py").is_file() for stage in STAGES)


def test_no_function_takes_more_than_ten_parameters():
    wide = [f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({_parameters(node)})"
            for path in PACKAGE.rglob("*.py") if "migrations" not in path.parts
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _parameters(node) > MAX_PARAMETERS]
    assert wide == []


def test_the_count_sees_every_kind_of_parameter():
    tree = ast.parse("def f(self, a, /, b, *c, d, **e): pass\ndef g(a, b=1, *, c): pass")
    assert [_parameters(node) for node in tree.body] == [5, 3]
