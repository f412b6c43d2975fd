"""The AMX bfloat16 tensor intrinsic: a matrix product tensorized with it compiles to AMX instructions on any
x86 machine, and where the CPU has AMX it computes the product of the bfloat16 values in float32."""

import numpy as np
import pytest

from tunewise.errors import TargetError
from tunewise.lowering import amx
from tunewise.target import host_cpu, isa_class

pytestmark = pytest.mark.tvm

AMX_TARGET = {"kind": "llvm", "mcpu": "sapphirerapids", "num-cores": 1}


def _host_has_amx() -> bool:
    import tvm

    return isa_class(tvm.target.Target(host_cpu())) == "amx"


def _tensorized(m: int, k: int, n: int, target: dict):
    """``C = A @ B`` with ``A`` in pairs and ``B`` in 32-column panels of pairs, in 32 x 32 x ``k`` blocks of the
    intrinsic."""
    import tvm
    from tvm import te

    a = te.placeholder((m, k // 2, 2), "bfloat16", name="A")
    b = te.placeholder((n // 32, k // 2, 32, 2), "bfloat16", name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b, amx.product(a, b)]))
    block = sch.get_sblock("C")
    i, j, k0, k1 = sch.get_loops(block)
    io, ii = sch.split(i, [None, 32])
    jo, ji = sch.split(j, [None, 32])
    sch.reorder(io, jo, ii, ji, k0, k1)
    sch.decompose_reduction(block, ii)
    sch.tensorize(ii, amx.amx_bf16_intrinsic(k))
    return tvm.tirx.build(sch.mod, target=tvm.target.Target(target))


def test_a_depth_that_is_not_a_whole_number_of_steps_is_refused():
    with pytest.raises(ValueError, match="multiple of 32"):
        amx.amx_bf16_intrinsic(48)


def test_the_tensorized_product_compiles_to_amx_tile_instructions():
    assembly = _tensorized(64, 64, 64, AMX_TARGET).inspect_source("s")
    for instruction in ("ldtilecfg", "tileloadd", "tdpbf16ps", "tilestored"):
        assert instruction in assembly


def test_asking_for_amx_succeeds_exactly_where_the_cpu_has_it():
    assert amx.tiles_granted() == _host_has_amx()
    if _host_has_amx():
        amx.enable_amx()
    else:
        with pytest.raises(TargetError, match="AMX"):
            amx.enable_amx()


def test_a_weight_in_panels_holds_each_column_block_s_pairs_in_the_order_the_intrinsic_reads_them():
    import ml_dtypes

    weight = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 7
    panels = amx.panels(weight)
    assert panels.shape == (2, 32, 32, 2) and panels.dtype == ml_dtypes.bfloat16
    k, n = 37, 45
    assert panels[n // 32, k // 2, n % 32, k % 2] == weight[k, n].astype(ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match="multiple of 32 rows and of 32 columns"):
        amx.panels(weight[:48])


@pytest.mark.skipif(not _host_has_amx(), reason="the CPU has no AMX bfloat16")
def test_the_tensorized_product_equals_the_float32_product_of_the_bfloat16_values():
    import ml_dtypes
    import tvm

    amx.enable_amx()
    m, k, n = 64, 96, 64
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    panels = amx.panels(b.astype(np.float32))
    c = tvm.runtime.tensor(np.zeros((m, n), np.float32))
    pairs = np.ascontiguousarray(a.reshape(m, k // 2, 2))
    _tensorized(m, k, n, host_cpu())(tvm.runtime.tensor(pairs), tvm.runtime.tensor(panels), c)
    truth = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.numpy(), truth, rtol=0, atol=1e-5 * np.abs(truth).max())
