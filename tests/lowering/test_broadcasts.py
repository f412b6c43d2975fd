"""Costly elementwise blocks read by a broadcast: which blocks are marked, and that MetaSchedule's design spaces
then compute them on the small tensor, once."""

import numpy as np
import pytest
import torch

from tunewise.importing import frontend
from tunewise.lowering import broadcasts, spaces, tasks

pytestmark = pytest.mark.tvm


class Excitation(torch.nn.Module):
    """Squeeze-and-excitation's end: a feature map scaled by the sigmoid of a gate computed from it."""

    def __init__(self, channels):
        super().__init__()
        self.reduce = torch.nn.Conv2d(channels, 4, 1)
        self.expand = torch.nn.Conv2d(4, channels, 1)

    def forward(self, x):
        gate = self.expand(torch.relu(self.reduce(x.mean((2, 3), keepdim=True))))
        return x * torch.sigmoid(gate)


def _gated(channels):
    """An excitation between two convolutions, so that its map and output stay channels-last."""
    return torch.nn.Sequential(torch.nn.Conv2d(channels, channels, 1), Excitation(channels),
                               torch.nn.Conv2d(channels, channels, 1))


def _task_mods(model, shape, host_target):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    return tasks.extract(frontend.load(model.eval(), example_inputs=(x,)), host_target).task_mods


def test_the_gates_sigmoid_is_marked_and_a_silu_is_not(host_target):
    gated = [m for m in _task_mods(_gated(16), (1, 16, 10, 10), host_target)
             if broadcasts.broadcast_producers(m["main"])]
    assert len(gated) == 1 and len(broadcasts.broadcast_producers(gated[0]["main"])) == 1
    assert '"schedule_rule": "None"' in gated[0].script()
    silu = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 1), torch.nn.SiLU())
    assert not [m for m in _task_mods(silu, (1, 16, 10, 10), host_target) if '"schedule_rule": "None"' in m.script()]


def test_a_bias_is_too_cheap_to_mark():
    from tvm import te, topi

    gate, x = te.placeholder((1, 1, 1, 8), name="gate"), te.placeholder((1, 6, 6, 8), name="x")
    func = te.create_prim_func([gate, x, topi.multiply(x, topi.add(gate, 1.0))])
    assert broadcasts.broadcast_producers(func) == []


def test_every_design_space_computes_the_sigmoid_once_a_channel(host_target):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    [mod] = [m for m in _task_mods(_gated(16), (1, 16, 10, 10), host_target)
             if broadcasts.broadcast_producers(m["main"])]
    [name] = broadcasts.broadcast_producers(mod["main"])
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=[int(d) for d in a.shape]).astype("float32")
              for a in ms.arg_info.ArgInfo.from_prim_func(mod["main"])]

    def run(scheduled):
        args = [tvm.runtime.tensor(a, tvm.cpu()) for a in arrays]
        tvm.tirx.build(scheduled, target=host_target)(*args)
        return args[-1].numpy()

    context = ms.TuneContext(mod, target=host_target, space_generator=spaces.generator(mod, host_target))
    for space in context.generate_design_space():
        kept = space.get_sblock(name)  # not inlined, and run once for each of its 16 elements at most
        assert np.prod([int(space.get(loop).extent) for loop in space.get_loops(kept)]) <= 16
        assert all(postproc.apply(space) for postproc in context.space_generator.postprocs)
        np.testing.assert_allclose(run(space.mod), run(mod), rtol=1e-5, atol=1e-6)
