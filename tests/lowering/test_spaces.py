import re

import pytest

from tunewise.lowering import spaces


@pytest.mark.parametrize(("annotated", "extents", "width"), [
    (64, [112], 56), (64, [112, 56], 56), (64, [7], 7), (64, [12544], 64), (16, [24], 12), (64, [], 64),
    (8, [3], 3)])
def test_the_width_is_the_largest_divisor_of_every_innermost_extent_up_to_the_annotated(annotated, extents, width):
    assert spaces.vectorize_width(annotated, extents) == width


def _postprocessed(mod, target, ours: bool):
    """``mod``'s first design-space schedule after the CPU postprocessors, with or without ours."""
    from tvm.s_tir import meta_schedule as ms

    generator = spaces.generator(mod, target)
    context = ms.TuneContext(mod, target=target, space_generator=generator, rand_state=0)
    sch = context.generate_design_space()[0]
    postprocs = list(context.space_generator.postprocs)
    assert type(postprocs[0]).__name__ == "_PyPostproc"  # ours, first
    for postproc in postprocs if ours else postprocs[1:]:
        assert postproc.apply(sch)
    return sch.mod


def _elementwise(shape):
    import tvm
    from tvm import te, topi

    a, b = te.placeholder(shape, name="a"), te.placeholder(shape, name="b")
    return tvm.IRModule({"main": te.create_prim_func([a, b, topi.nn.relu(topi.add(a, b))])})


@pytest.mark.tvm
def test_an_elementwise_kernel_is_vectorised_within_its_rows_with_vector_loads(host_target):
    import tvm

    mod = _elementwise((1, 8, 112, 112))  # rows of 112 floats: MetaSchedule's 64 lanes run across them
    for ours, scalar in ((True, False), (False, True)):
        scheduled = _postprocessed(mod, host_target, ours)
        llvm_ir = tvm.tirx.build(scheduled, target=host_target).inspect_source("ll")
        assert bool(re.search(r"load float,", llvm_ir)) == scalar, ours
        assert bool(re.search(r"load <\d+ x float>", llvm_ir)) == (not scalar), ours


@pytest.mark.tvm
def test_a_kernel_that_reduces_keeps_the_width_metaschedule_asks_for(host_target):
    import tvm
    from tvm import te

    a = te.placeholder((1, 8, 14, 14), name="a")
    k = te.reduce_axis((0, 14), name="k")
    mod = tvm.IRModule({"main": te.create_prim_func([a, te.compute((1, 8, 14), lambda n, c, h: te.sum(
        a[n, c, h, k], axis=k), name="s")])})
    ours, stock = (_postprocessed(mod, host_target, o) for o in (True, False))
    assert ours.script() == stock.script()


def _amx_product(rows: int, depth: int, columns: int, batch: tuple[int, ...] = ()):
    import tvm
    from tvm import te

    from tunewise.lowering import amx

    a = te.placeholder((*batch, rows, depth // 2, 2), "bfloat16", name="A")
    b = te.placeholder((*batch, columns // 32, depth // 2, 32, 2), "bfloat16", name="B")
    return tvm.IRModule({"main": te.create_prim_func([a, b, amx.product(a, b)])})


@pytest.mark.tvm
@pytest.mark.parametrize(("depth", "intrinsic"), [(384, 384), (1536, 384), (96, 96), (160, 160), (480, 160)])
def test_a_bfloat16_product_on_amx_is_searched_around_the_deepest_intrinsic_that_divides_its_depth(depth, intrinsic):
    import tvm

    assert spaces.amx_depth(_amx_product(64, depth, 64), tvm.target.Target({"kind": "llvm"})) == intrinsic


@pytest.mark.tvm
def test_a_batch_of_products_of_two_activations_is_searched_around_its_depth_whatever_its_rows():
    """Attention's ``Q @ K^T``: its left operand, in pairs, also ends in 32 x 2 where the depth is 64."""
    import tvm

    target = tvm.target.Target({"kind": "llvm"})
    assert spaces.amx_depth(_amx_product(128, 64, 128, batch=(6,)), target) == 64
    assert spaces.amx_depth(_amx_product(128, 128, 64, batch=(6,)), target) == 128


@pytest.mark.tvm
def test_a_float32_task_or_a_gpu_task_is_not_searched_on_amx(host_target):
    import tvm

    assert spaces.amx_depth(_elementwise((4, 64)), host_target) is None
    assert spaces.amx_depth(_amx_product(64, 64, 64), tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})) is None


@pytest.mark.tvm
def test_every_schedule_of_an_amx_space_is_tensorized_with_the_intrinsic():
    import tvm
    from tvm.s_tir import meta_schedule as ms

    mod = _amx_product(64, 128, 64)
    target = tvm.target.Target({"kind": "llvm", "mcpu": "sapphirerapids", "num-cores": 2})
    context = ms.TuneContext(mod, target=target, space_generator=spaces.generator(mod, target), rand_state=0)
    schedules = context.generate_design_space()
    assert schedules
    for sch in schedules:
        for postproc in context.space_generator.postprocs:
            assert postproc.apply(sch)
        assert "tunewise_amx_bf16_32x32x128" in str(sch.trace) and "llvm.x86.tdpbf16ps" in sch.mod.script()
