"""The row-partition rule on real TIR schedules: which loop comes outermost decides which part of the output each
thread writes."""

import pytest

tvm = pytest.importorskip("tvm")

from tvm import te  # noqa: E402

from tunewise import row_partition  # noqa: E402


def _schedule(shape):
    a = te.placeholder(shape, name="a")
    b = te.compute(shape, lambda *i: a[i] * 2.0, name="b")
    return tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b])}))


def _loops(sch):
    return sch.get_loops(sch.get_sblock("b"))


def test_rows_outermost_pass():
    sch = _schedule((1, 8, 8, 16))
    n, h, w, c = _loops(sch)
    h0, h1 = sch.split(h, factors=[2, 4])
    sch.reorder(h0, n, w, h1, c)
    assert row_partition.splits_by_rows(sch.mod["main"])
    assert row_partition.postproc().apply(sch)


@pytest.mark.parametrize("outer", ["columns", "channels"])
def test_columns_or_channels_outermost_fail(outer):
    sch = _schedule((1, 8, 8, 16))
    n, h, w, c = _loops(sch)
    first = w if outer == "columns" else c
    sch.reorder(first, *[loop for loop in (n, h, w, c) if loop is not first])
    assert not row_partition.splits_by_rows(sch.mod["main"])
    assert not row_partition.postproc().apply(sch)


def test_a_unit_outer_tile_leaves_the_split_to_the_next_loop():
    sch = _schedule((1, 8, 8, 16))
    n, h, w, c = _loops(sch)
    h0, h1 = sch.split(h, factors=[1, 8])
    w0, w1 = sch.split(w, factors=[2, 4])
    sch.reorder(n, h0, w0, h1, w1, c)  # h0 has extent 1: the threads split the columns
    assert not row_partition.splits_by_rows(sch.mod["main"])
    sch = _schedule((1, 8, 8, 16))
    n, h, w, c = _loops(sch)
    w0, w1 = sch.split(w, factors=[1, 8])
    sch.reorder(n, w0, h, w1, c)  # w0 has extent 1: the rows come first
    assert row_partition.splits_by_rows(sch.mod["main"])


def test_the_first_dimension_above_one_counts_as_rows():
    sch = _schedule((1, 1, 8, 16))  # one row: the columns are the leading dimension
    n, h, w, c = _loops(sch)
    sch.reorder(w, n, h, c)
    assert row_partition.splits_by_rows(sch.mod["main"])
    sch.reorder(c, w)
    assert not row_partition.splits_by_rows(sch.mod["main"])


def test_outputs_of_other_ranks_are_free():
    sch = _schedule((16, 32))
    i, j = _loops(sch)
    sch.reorder(j, i)
    assert row_partition.splits_by_rows(sch.mod["main"])
