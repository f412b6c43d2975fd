"""The rewrites of what TVM's torch importer gets wrong, on hand-built Relax (through the importer:
tests/importing/test_frontend.py)."""

import numpy as np
import pytest

pytestmark = pytest.mark.tvm


def _module(body):
    """A Relax module whose ``main`` takes a float32 ``x`` of shape (3, 5) and an int64 ``i`` of shape (4,) and
    returns ``body(x, i)``."""
    from tvm import relax

    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((3, 5), "float32"))
    i = relax.Var("i", relax.TensorType((4,), "int64"))
    with builder.function("main", [x, i]):
        with builder.dataflow():
            out = builder.emit_output(body(x, i))
        builder.emit_func_output(out)
    return builder.get()


def _run(mod, *args):
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), tvm.cpu())
    return vm["main"](*(tvm.runtime.tensor(a) for a in args)).numpy()


def test_constant_negative_indices_are_taken_from_the_front():
    from tvm import relax

    from tunewise.importing import repairs

    mod = _module(lambda x, i: relax.op.take(x, relax.const(np.array([-1, 0, -5]), "int64"), axis=1))
    x, i = np.arange(15, dtype=np.float32).reshape(3, 5), np.zeros(4, dtype=np.int64)
    np.testing.assert_array_equal(_run(repairs.repair(mod), x, i), x[:, [-1, 0, -5]])
    kept = _module(lambda x, i: relax.op.take(x, relax.const(np.array([4, 0]), "int64"), axis=1))
    assert repairs.repair(kept).script() == kept.script()  # nothing negative: untouched


def test_an_integer_clip_to_infinity_becomes_a_one_sided_bound():
    from tvm import relax

    from tunewise.importing import repairs

    mod = _module(lambda x, i: relax.op.clip(i, float("-inf"), 4))
    i = np.array([-7, 2, 4, 9], dtype=np.int64)
    np.testing.assert_array_equal(_run(repairs.repair(mod), np.zeros((3, 5), np.float32), i), np.minimum(i, 4))
    floats = _module(lambda x, i: relax.op.clip(x, float("-inf"), 1.0))
    assert repairs.repair(floats).script() == floats.script()  # a float clip compiles as it is
