"""The measurer on real TVM: argument allocation that every task survives."""

import math

import pytest
import torch

from tunewise import frontend, tasks

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
