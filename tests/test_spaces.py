"""CPU design spaces against real TVM: the padding of a thin convolution is inlined into it in every design
space, and what is inlined computes what the padded copy did; a deep convolution's padding is left to the
search."""

import numpy as np
import pytest

pytestmark = pytest.mark.tvm


def _convolution(data_shape, weight_shape, *, stride: int, groups: int):
    """The TIR module of an NHWC convolution (HWIO weight, padding 1) plus bias and ReLU6, as the
    channels-last graph step gives it (``pad_temp`` then the convolution's block)."""
    import tvm
    from tvm import te, topi

    data = te.placeholder(data_shape, name="data")
    weight = te.placeholder(weight_shape, name="weight")
    bias = te.placeholder((1, 1, 1, weight_shape[-1]), name="bias")
    if groups == 1:
        conv = topi.nn.conv2d_nhwc(data, weight, stride, 1, 1)
    else:
        conv = topi.nn.group_conv2d_nhwc(data, weight, stride, 1, 1, groups)
    out = topi.minimum(topi.maximum(topi.add(conv, bias), 0.0), 6.0)
    return tvm.IRModule({"main": te.create_prim_func([data, weight, bias, out])})


def _spaces(mod, target):
    from tvm.s_tir import meta_schedule as ms

    from tunewise import spaces

    context = ms.TuneContext(mod, target=target, space_generator=spaces.generator(mod, target), task_name="t")
    return context.generate_design_space()


def _has_padding(sch) -> bool:
    """Whether the scheduled module of ``sch`` still computes the padded copy ``pad_temp``."""
    return 'sblock("pad_temp")' in sch.mod.script()


def _run(mod, target, args):
    import tvm

    from tunewise import tvm_env

    tensors = [tvm.runtime.tensor(a) for a in args]
    tvm_env.build_candidate(mod, target)["main"](*tensors)
    return tensors[-1].numpy()


@pytest.mark.parametrize("shapes", [
    ((1, 10, 10, 16), (3, 3, 1, 16), 1, 16),  # depthwise
    ((1, 12, 12, 3), (3, 3, 3, 8), 2, 1),  # a stem on three channels
], ids=["depthwise", "stem"])
def test_thin_convolutions_read_their_input_without_a_padded_copy(host_target, shapes):
    from tunewise.tasks import args_info

    data_shape, weight_shape, stride, groups = shapes
    mod = _convolution(data_shape, weight_shape, stride=stride, groups=groups)
    spaces = _spaces(mod, host_target)
    assert spaces and not any(_has_padding(s) for s in spaces)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([int(d) for d in a.shape]).astype("float32") for a in args_info(mod)]
    np.testing.assert_allclose(_run(spaces[0].mod, host_target, args), _run(mod, host_target, args), rtol=1e-5,
                               atol=1e-5)


def test_a_deep_convolution_leaves_its_padding_to_the_search(host_target):
    """MetaSchedule's own rules sample where the padding of a deep convolution is computed (inlined among the
    places they may draw)."""
    mod = _convolution((1, 8, 8, 16), (3, 3, 16, 16), stride=1, groups=1)
    spaces = _spaces(mod, host_target)
    assert spaces and all(any(inst.kind.name == "SampleComputeLocation" for inst in s.trace.insts) for s in spaces)
