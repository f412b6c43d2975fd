"""Depthwise convolutions: which tasks are marked, and every candidate of their design space built with TVM for
this CPU, against the same task compiled unscheduled."""

import numpy as np
import pytest
import torch

from tunewise.importing import frontend
from tunewise.lowering import depthwise, spaces, tasks

pytestmark = pytest.mark.tvm


def _tasks(model, size, host_target):
    x = torch.randn(1, model[0].in_channels, size, size, generator=torch.Generator().manual_seed(0))
    return tasks.extract(frontend.load(model.eval(), example_inputs=(x,)), host_target).task_mods


def _marked(mods):
    return [m for m in mods if depthwise.RULE in m.script()]


def _depthwise(channels, kernel, stride, activation):
    return torch.nn.Sequential(torch.nn.Conv2d(channels, channels, kernel, stride, kernel // 2, groups=channels),
                               *activation)


def test_only_depthwise_convolutions_are_marked(host_target):
    grouped = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, padding=1, groups=4), torch.nn.ReLU())
    dense = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU())
    assert not _marked(_tasks(grouped, 8, host_target)) and not _marked(_tasks(dense, 8, host_target))
    [marked] = _marked(_tasks(_depthwise(16, 3, 1, [torch.nn.SiLU()]), 8, host_target))
    assert depthwise.depthwise_block(marked["main"]) is not None


@pytest.mark.parametrize(("channels", "kernel", "stride", "size", "activation"), [
    (32, 3, 1, 9, [torch.nn.SiLU()]),  # width 9: no tile of WIDTH_TILES divides it
    (24, 5, 2, 14, [torch.nn.ReLU6()]),  # 8 lanes
    (20, 3, 1, 7, []),  # 4 lanes, no activation: the bias is the epilogue
])
def test_every_candidate_of_a_depthwise_convolution_builds_and_computes_it(host_target, channels, kernel, stride,
                                                                           size, activation):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    [mod] = _marked(_tasks(_depthwise(channels, kernel, stride, activation), size, host_target))
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=[int(d) for d in a.shape]).astype("float32")
              for a in ms.arg_info.ArgInfo.from_prim_func(mod["main"])]

    def run(scheduled):
        args = [tvm.runtime.tensor(a, tvm.cpu()) for a in arrays]
        tvm.tirx.build(scheduled, target=host_target)(*args)
        return args[-1].numpy()

    expected = run(mod)
    tiles = set()
    for seed in range(8):  # the width's tile is sampled: several draws of the space
        context = ms.TuneContext(mod, target=host_target, space_generator=spaces.generator(mod, host_target),
                                 rand_state=seed)
        [space] = context.generate_design_space()
        assert all(postproc.apply(space) for postproc in context.space_generator.postprocs)
        script = space.mod.script()
        assert "pad_temp" not in script and "T.vectorized" in script and "T.parallel" in script
        tiles |= {int(v) for inst, v in space.trace.decisions.items() if inst.kind.name == "SampleCategorical"}
        np.testing.assert_allclose(run(space.mod), expected, rtol=1e-5, atol=1e-5)
    assert len(tiles) > 1
