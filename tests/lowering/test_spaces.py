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
