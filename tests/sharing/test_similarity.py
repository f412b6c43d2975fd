"""Similarity across shapes and transfer across shapes: hand-made traces, and real TVM on two matmuls and a conv."""

import math

import numpy as np
import pytest

from tunewise import sharing
from tunewise.sharing._similarity import divisors, trace_signature


def _trace(decisions, parallel=32, block="C"):
    """A hand-made matmul-like trace in MetaSchedule's JSON form: two tiles, a parallel annotation, post-processing."""
    instructions = [["GetSBlock", [], [block, "main"], ["b0"]],
                    ["GetLoops", ["b0"], [], ["l1", "l2"]],
                    ["SamplePerfectTile", ["l1"], [4, 64], ["v3", "v4", "v5", "v6"]],
                    ["Split", ["l1", "v3", "v4", "v5", "v6"], [True, False], ["l7", "l8", "l9", "l10"]],
                    ["SamplePerfectTile", ["l2"], [2, 64], ["v11", "v12"]],
                    ["Split", ["l2", "v11", "v12"], [True, False], ["l13", "l14"]],
                    ["Annotate", ["b0", parallel], ["meta_schedule.parallel"], []],
                    ["EnterPostproc", [], [], []],
                    ["Parallel", ["l7"], [], []]]
    return [instructions, [[2, decisions[0]], [4, decisions[1]]]]


def test_a_sketch_ignores_decisions_and_constants_and_tiles_are_the_decisions_products():
    a = trace_signature(_trace([[2, 2, 4, 4], [8, 8]]))
    b = trace_signature(_trace([[1, 4, 1, 16], [2, 32]], parallel=64))  # other samples, other parallel extent
    assert a == b and a.tiles == ((64, 4), (64, 2)) and len(a.sketches) == 1
    c = trace_signature(_trace([[3, 1, 2, 4], [7, 8]]))
    assert c.sketches == a.sketches and c.tiles == ((24, 4), (56, 2))
    assert trace_signature(_trace([[2, 2, 4, 4], [8, 8]], block="D")).sketches != a.sketches


def _with_epilogue(trace, blocks, how="ComputeInline"):
    """``trace`` (:func:`_trace`) with elementwise ``blocks`` fetched first and then handled ``how``."""
    instructions, decisions = trace
    fetched = [["GetSBlock", [], [name, "main"], [f"b{90 + i}"]] for i, name in enumerate(blocks)]
    handled = [[how, [f"b{90 + i}"], [], []] if how != "ComputeAt" else ["ComputeAt", [f"b{90 + i}", "l7"], [1, -1], []]
               for i in range(len(blocks))]
    shift = len(fetched) + len(handled)
    return [[*fetched, *handled, *instructions], [[index + shift, d] for index, d in decisions]]


def test_the_blocks_a_trace_only_inlines_are_not_its_sketch():
    plain = _trace([[2, 2, 4, 4], [8, 8]])
    relu = trace_signature(_with_epilogue(plain, ["T_add"]))
    relu6 = trace_signature(_with_epilogue(plain, ["T_add", "T_maximum"]))  # one more block inlined
    assert relu == relu6 == trace_signature(plain) and relu.tiles == ((64, 4), (64, 2))
    assert trace_signature(_with_epilogue(plain, ["T_add"], how="ReverseComputeInline")) == relu
    # a block computed at a tile is scheduled, not only inlined: another sketch
    assert trace_signature(_with_epilogue(plain, ["pad_temp"], how="ComputeAt")).sketches != relu.sketches
    instructions = [("GetSBlock", [], ["b0"]), ("GetSBlock", [], ["b1"]), ("ComputeInline", ["b1"], []),
                    ("GetLoops", ["b0"], ["l2"]), ("GetSBlock", [], ["b3"]), ("ComputeInline", ["b3"], []),
                    ("ComputeAt", ["b3", "l2"], [])]
    assert sharing.inlined_blocks(instructions) == [1, 2]  # b3 is also computed at a loop


def test_similarity_is_the_product_of_the_jaccard_overlaps_of_the_divisors():
    assert divisors(64) == {1, 2, 4, 8, 16, 32, 64} and divisors(1) == {1} and divisors(12) == {1, 2, 3, 4, 6, 12}
    a = trace_signature(_trace([[2, 2, 4, 4], [8, 8]]))  # 64, 64
    c = trace_signature(_trace([[3, 1, 2, 4], [7, 8]]))  # 24, 56
    # 64 vs 24: {1, 2, 4, 8} of 11; 64 vs 56: {1, 2, 4, 8} of 11
    assert sharing.similarity(a, c) == pytest.approx((4 / 11) * (4 / 11))
    assert sharing.similarity(a, a) == 1.0 and sharing.similarity(c, a) == sharing.similarity(a, c)
    other = sharing.Signature(frozenset({"x"}), a.tiles)
    assert sharing.similarity(a, other) == 0.0  # no common sketch
    assert sharing.similarity(a, sharing.Signature(a.sketches, ((64, 2), (64, 2)))) == 0.0  # other parts


def test_nearest_factors_fit_a_tile_to_another_extent():
    assert sharing.nearest_factors(64, (2, 2, 4, 4)) == (2, 2, 4, 4)  # it fits: kept
    fitted = sharing.nearest_factors(96, (2, 2, 4, 4))
    assert math.prod(fitted) == 96 and fitted in {(2, 3, 4, 4), (3, 2, 4, 4), (2, 2, 6, 4), (2, 2, 4, 6)}
    assert sharing.nearest_factors(7, (4, 16)) == (1, 7)
    assert sharing.nearest_factors(128, (1, 128), max_innermost=64) == (2, 64)


def test_warm_sources_are_the_most_similar_comparable_workloads():
    a = trace_signature(_trace([[2, 2, 4, 4], [8, 8]]))
    same = trace_signature(_trace([[4, 4, 2, 2], [16, 4]]))
    near = trace_signature(_trace([[3, 1, 2, 4], [7, 8]]))
    other = trace_signature(_trace([[2, 2, 4, 4], [8, 8]], block="D"))
    candidates = [(5, near), (6, other), (7, same)]
    assert sharing.warm_sources(a, candidates, limit=4) == [7, 5]
    assert sharing.warm_sources(a, candidates, limit=1) == [7]
    assert sharing.warm_sources(a, candidates, limit=4, threshold=0.5) == [7]


def _matmul(n, m, k):
    import tvm
    from tvm import te

    a, b = te.placeholder((n, k), name="A"), te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def _conv(ci, co, size):
    import tvm
    from tvm import te, topi

    x, w = te.placeholder((1, ci, size, size), name="x"), te.placeholder((co, ci, 3, 3), name="w")
    return tvm.IRModule({"main": te.create_prim_func([x, w, topi.nn.conv2d_nchw(x, w, 1, 1, 1)])})


def _conv_bias(ci, co, size, clip):
    """A 3x3 convolution, a bias and a ReLU (``clip`` None) or a clip to ``[0, clip]`` (ReLU6: a maximum block
    and a minimum block, as Relax fuses them)."""
    import tvm
    from tvm import te, topi

    x, w = te.placeholder((1, ci, size, size), name="x"), te.placeholder((co, ci, 3, 3), name="w")
    b = te.placeholder((co,), name="b")
    conv = topi.nn.conv2d_nchw(x, w, 1, 1, 1)
    added = te.compute(conv.shape, lambda n, c, h, v: conv[n, c, h, v] + b[c], name="T_add")
    out = te.compute(conv.shape, lambda *i: te.max(added(*i), 0.0), name="T_maximum")
    if clip is not None:
        low = out
        out = te.compute(conv.shape, lambda *i: te.min(low(*i), float(clip)), name="T_minimum")
    return tvm.IRModule({"main": te.create_prim_func([x, w, b, out])})


def _candidates(mod, target, n):
    """``n`` post-processed candidates of ``mod``'s design space, sampled at random (as the search's first
    candidates are; its evolution would rank a population of hundreds by the untrained model first)."""
    from tvm.s_tir import meta_schedule as ms

    context = ms.TuneContext(mod, target=target, space_generator="post-order-apply", search_strategy="replay-trace",
                             task_name="t", num_threads=1, rand_state=1).clone()
    context.pre_tuning(n, n, context.generate_design_space(), ms.database.MemoryDatabase(),
                       ms.cost_model.RandomModel())
    return context.generate_measure_candidates()


def _run(mod, target, *arrays):
    import tvm

    function = tvm.compile(mod, target=target)
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    function(*tensors)
    return tensors[-1].numpy()


@pytest.mark.tvm
def test_matmuls_of_two_shapes_are_comparable_and_a_matmul_and_a_conv_are_not(host_target):
    small, large, conv = (sharing.task_signature(m, host_target)
                          for m in (_matmul(64, 64, 64), _matmul(96, 48, 72), _conv(8, 16, 14)))
    assert small.sketches == large.sketches and len(small.sketches) == 3  # three design spaces, one structure
    assert small.tiles == ((64, 4), (64, 4), (64, 2)) and large.tiles == ((96, 4), (48, 4), (72, 2))
    expected = (6 / 13) * (5 / 12) * (4 / 15)  # 64 vs 96, 64 vs 48, 64 vs 72
    assert sharing.similarity(small, large) == pytest.approx(expected) and expected > sharing.THRESHOLD
    assert sharing.similarity(small, conv) == 0.0
    assert sharing.similarity(conv, sharing.task_signature(_conv(16, 16, 12), host_target)) > sharing.THRESHOLD
    # a measured candidate's record has one of its task's sketches
    from tvm.s_tir import meta_schedule as ms

    from tunewise.stores._database import record_json

    candidate = _candidates(_matmul(64, 64, 64), host_target, 1)[0]
    record = ms.database.TuningRecord(candidate.sch.trace, ms.database.Workload(_matmul(64, 64, 64)), [1e-3],
                                      host_target, candidate.args_info)
    measured = sharing.record_signature(record_json(record))
    assert measured.sketches <= small.sketches and measured.tiles == small.tiles


@pytest.mark.tvm
def test_a_matmul_schedule_moves_to_another_shape_and_computes_the_same(host_target):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 72)).astype("float32"), rng.standard_normal((72, 48)).astype("float32")
    moved = 0
    for candidate in _candidates(_matmul(64, 64, 64), host_target, 3):
        sch = sharing.transfer_across(candidate.sch.trace, _matmul(96, 48, 72), host_target)
        assert sch is not None
        decisions = [[int(x) for x in sch.trace.decisions[i]] for i in sch.trace.insts
                     if i.kind.name == "SamplePerfectTile"]
        assert [math.prod(d) for d in decisions] == [96, 48, 72]
        out = _run(sch.mod, host_target, a, b, np.zeros((96, 48), "float32"))
        np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
        moved += 1
    assert moved == 3


@pytest.mark.tvm
def test_a_conv_schedule_moves_to_another_shape_and_computes_the_same(host_target):
    import tvm

    rng = np.random.default_rng(1)
    member = _conv(16, 16, 12)
    x, w = rng.standard_normal((1, 16, 12, 12)).astype("float32"), rng.standard_normal((16, 16, 3, 3)).astype("float32")
    reference = _run(tvm.s_tir.Schedule(member).mod, host_target, x, w, np.zeros((1, 16, 12, 12), "float32"))
    for candidate in _candidates(_conv(8, 16, 14), host_target, 2):
        sch = sharing.transfer_across(candidate.sch.trace, member, host_target)
        assert sch is not None
        out = _run(sch.mod, host_target, x, w, np.zeros((1, 16, 12, 12), "float32"))
        np.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.tvm
def test_a_trace_of_another_computation_does_not_transfer(host_target):
    for candidate in _candidates(_matmul(64, 64, 64), host_target, 2):
        assert sharing.transfer_across(candidate.sch.trace, _conv(8, 16, 14), host_target) is None


@pytest.mark.tvm
def test_a_conv_schedule_moves_to_another_shape_and_another_epilogue_and_computes_the_same(host_target):
    import tvm

    source, member = _conv_bias(8, 16, 14, clip=None), _conv_bias(16, 16, 12, clip=6)
    assert sharing.similarity(sharing.task_signature(source, host_target),
                              sharing.task_signature(member, host_target)) > sharing.THRESHOLD
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((1, 16, 12, 12)).astype("float32"), rng.standard_normal((16, 16, 3, 3)).astype("float32")
    b = rng.standard_normal(16).astype("float32")
    reference = _run(tvm.s_tir.Schedule(member).mod, host_target, x, w, b, np.zeros((1, 16, 12, 12), "float32"))
    assert 0 < reference.max() <= 6 and reference.min() == 0  # the clip is there
    to = sharing.destination(member, host_target)
    for candidate in _candidates(source, host_target, 2):
        sch = sharing.transfer_across(candidate.sch.trace, member, host_target, to)
        assert sch is not None
        blocks = {i.attrs[0] for i in sch.trace.insts if i.kind.name == "GetSBlock"}
        assert "T_minimum" in blocks or "T_maximum" in blocks  # the member's own epilogue was inlined
        out = _run(sch.mod, host_target, x, w, b, np.zeros((1, 16, 12, 12), "float32"))
        np.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-4)
