"""Transposes that move the innermost axis: which functions are marked, and every candidate of their design space
built with TVM for this CPU, against numpy's transpose."""

import numpy as np
import pytest
import torch

from tunewise.importing import frontend
from tunewise.lowering import spaces, tasks, transposes

pytestmark = pytest.mark.tvm


def _transpose(shape, axes):
    from tvm import te, topi

    a = te.placeholder(shape, name="A")
    return te.create_prim_func([a, topi.transpose(a, axes)])


def _elementwise(shape):
    from tvm import te, topi

    a = te.placeholder(shape, name="A")
    return te.create_prim_func([a, topi.add(a, 1.0)])


@pytest.mark.parametrize(("shape", "axes", "moved"), [
    ((1, 8, 8, 16), (0, 3, 1, 2), 1),  # channels-last to channels-first: the channels are the output's axis 1
    ((1, 16, 8, 8), (0, 2, 3, 1), 2),  # channels-first to channels-last: the width is the output's axis 2
    ((64, 48), (1, 0), 0),
    ((2, 8, 4, 16), (0, 2, 1, 3), None),  # attention's heads: the innermost axis stays innermost
])
def test_the_position_of_the_moved_axis(shape, axes, moved):
    assert transposes.moved_axis(_transpose(shape, axes)) == moved


def test_other_functions_are_not_transposes():
    assert transposes.moved_axis(_elementwise((4, 16))) is None


@pytest.mark.parametrize(("shape", "axes"), [((1, 111, 111, 16), (0, 3, 1, 2)), ((1, 3, 20, 20), (0, 2, 3, 1)),
                                             ((1, 5, 5, 3), (0, 3, 1, 2)), ((40, 24), (1, 0))])
def test_every_candidate_of_a_marked_transpose_builds_and_transposes(host_target, shape, axes):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    mod = transposes.annotate()(tvm.IRModule({"main": _transpose(shape, axes)}))
    assert f'"schedule_rule": "{transposes.RULE}"' in mod.script()
    x = np.random.default_rng(0).normal(size=shape).astype("float32")
    for seed in range(4):  # the tile sizes are sampled: several draws of the space
        context = ms.TuneContext(mod, target=host_target, space_generator=spaces.generator(mod, host_target),
                                 rand_state=seed)
        [space] = context.generate_design_space()
        assert "T.vectorized" in space.mod.script()
        assert all(postproc.apply(space) for postproc in context.space_generator.postprocs)
        built = tvm.tirx.build(space.mod, target=host_target)
        out = tvm.runtime.tensor(np.zeros(np.transpose(x, axes).shape, "float32"), tvm.cpu())
        built(tvm.runtime.tensor(x, tvm.cpu()), out)
        np.testing.assert_array_equal(out.numpy(), np.transpose(x, axes))


def test_a_channels_last_model_marks_its_output_transpose(host_target):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    extracted = tasks.extract(frontend.load(model, example_inputs=(x,)), host_target)
    marked = [m for m in extracted.task_mods if transposes.RULE in m.script()]
    assert marked and all("conv2d" not in m.script() for m in marked)
