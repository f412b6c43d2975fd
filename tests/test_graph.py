"""Graph levels on real TVM: every level compiles tiny-cnn to the reference outputs, and ``nhwc`` really moves
the convolutions to channels-last."""

import pytest

from tunewise import compile as compiler
from tunewise import frontend, graph, tasks
from tunewise.errors import InputError

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def tiny_cnn():
    return frontend.load("tiny-cnn")


def _conv_shapes(model, argument: int):
    """The shape of argument ``argument`` (0: data, 1: weights) of every convolution task."""
    return [tuple(int(d) for d in tasks.args_info(mod)[argument].shape)
            for t, mod in zip(model.tasks, model.task_mods, strict=True) if "conv2d" in t.name]


@pytest.mark.parametrize("level", graph.LEVELS)
def test_every_level_compiles_to_the_reference_outputs(tiny_cnn, host_target, level):
    model = tasks.extract(tiny_cnn, host_target, level=level)
    compiled = compiler.CompiledModel(compiler.build(model), host_target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-4


def test_nhwc_puts_channels_innermost_and_fold_bn_keeps_them_outer(tiny_cnn, host_target):
    # tiny-cnn: 3 -> 16 channels on 16x16 (3x3 kernels), then 16 -> 32 with stride 2
    folded = tasks.extract(tiny_cnn, host_target, level="fold-bn")
    channels_last = tasks.extract(tiny_cnn, host_target, level="nhwc")
    nchw, oihw = _conv_shapes(folded, 0), _conv_shapes(folded, 1)
    nhwc, hwio = _conv_shapes(channels_last, 0), _conv_shapes(channels_last, 1)
    assert sorted(s[1] for s in nchw) == [3, 16]
    assert sorted(s[-1] for s in nhwc) == [3, 16]
    assert all(s[1] == s[2] for s in nhwc)  # square spatial dims now in the middle
    assert sorted(s[0] for s in oihw) == [16, 32]
    assert sorted(s[-1] for s in hwio) == [16, 32]  # output channels innermost in the weights too


def test_fold_bn_removes_the_batch_norm_tasks(tiny_cnn, host_target):
    decomposed = tasks.extract(tiny_cnn, host_target, level="decompose")
    folded = tasks.extract(tiny_cnn, host_target, level="fold-bn")
    assert sum(t.weight for t in folded.tasks) < sum(t.weight for t in decomposed.tasks)


def test_unknown_level_is_an_input_error(tiny_cnn, host_target):
    with pytest.raises(InputError, match="unknown graph level 'max'"):
        tasks.extract(tiny_cnn, host_target, level="max")


def test_heaviest_keeps_the_largest_weighted_default_latencies_in_order(tiny_mlp):
    _, heavy = sorted(range(2), key=lambda k: tiny_mlp.tasks[k].weight * tiny_mlp.tasks[k].default_latency)
    reduced = tiny_mlp.heaviest(1)
    assert reduced.tasks == (tiny_mlp.tasks[heavy],)
    assert reduced.task_mods == (tiny_mlp.task_mods[heavy],)
    assert tiny_mlp.heaviest(5).tasks == tiny_mlp.tasks
