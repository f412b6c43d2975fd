"""The measurer on real TVM: argument allocation that every task survives."""

import math

import pytest
import torch

from tunewise.importing import frontend
from tunewise.lowering import tasks

pytestmark = pytest.mark.tvm


class _Embed(torch.nn.Module):
    """A 4096-row embedding: random int32 indices would read up to 2**31 rows past the table."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(4096, 16)

    def forward(self, ids):
        return self.table(ids) * 2.0


def test_gather_tasks_get_a_finite_default_latency(host_target, measurer):
    imported = frontend.from_torch(_Embed().eval(), (torch.randint(0, 4096, (1, 32)),), name="embed")
    model = tasks.extract(imported, host_target, measurer=measurer)
    assert any("take" in t.name for t in model.tasks)
    assert all(math.isfinite(t.default_latency) and t.default_latency > 0 for t in model.tasks)


def test_a_schedule_recomputing_a_masked_softmax_per_element_is_measured_behind_the_default(host_target, measurer):
    """PyTorch's attention keeps its softmax only on rows with something to attend to (a mask, true in a model
    without padding). A schedule that recomputes each row's sum for every element does 96x the work, all of it
    where the mask is true: measured with a false mask it ran 1000x faster than with a true one and ranked
    first, and a ViT tuned so ran 9x slower than its estimate."""
    from tvm import s_tir

    with torch.random.fork_rng():
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True).eval()
        x = torch.randn(1, 96, 32)
    model = tasks.extract(frontend.from_torch(layer, (x,), name="encoder"), host_target)
    [mod] = [m for t, m in zip(model.tasks, model.task_mods, strict=True) if "softmax" in t.name and "where" in t.name]
    sch = s_tir.Schedule(mod)
    for block in ("T_softmax_exp", "T_softmax_norm", "compute", "T_logical_not"):
        sch.compute_inline(sch.get_sblock(block))
    sch.reverse_compute_inline(sch.get_sblock("T_broadcast_to"))
    sch.compute_at(sch.get_sblock("T_softmax_expsum"), sch.get_loops(sch.get_sblock("T_where"))[-1])
    default, per_element = measurer.measure([(m, tasks.args_info(m)) for m in (mod, sch.mod)])
    assert per_element.latency > 5 * default.latency, (per_element.latency, default.latency)
