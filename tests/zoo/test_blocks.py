"""The zoo's blocks and the two full-size held-out networks: each builds, computes something that depends on its
input, and imports through the frontend; each block, at a tiny size, compiles untuned to PyTorch's outputs."""

import importlib.util
import os
import sys

import pytest
import torch

from tunewise import target as targets
from tunewise import zoo
from tunewise.delivery import compile
from tunewise.importing import frontend
from tunewise.lowering import tasks
from tunewise.zoo import architectures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# each block at a tiny size: the constructor's arguments and the input's shape
TINY = {"mbconv": ("MBConv", {"cin": 8, "cout": 8, "expand": 2}, (1, 8, 8, 8)),
        "c2f-sppf": ("C2fSPPF", {"channels": 8}, (1, 8, 8, 8)),
        "convnext-block": ("ConvNeXtBlock", {"dim": 8}, (1, 8, 8, 8)),
        "llama-block": ("LlamaBlock", {"dim": 16, "heads": 2, "hidden": 32, "seq": 8}, (1, 8, 16)),
        "swin-blocks": ("SwinBlocks", {"dim": 8, "heads": 2, "resolution": 8, "window": 4}, (1, 64, 8)),
        "stem-conv": ("StemConv", {"channels": 8}, (1, 3, 16, 16)),
        "conformer-conv": ("ConformerConv", {"dim": 16, "kernel": 7}, (1, 8, 16))}


def _tiny(name: str):
    architecture, kwargs, shape = TINY[name]
    torch.manual_seed(0)
    model = getattr(architectures, architecture)(**kwargs).eval()
    for module in model.modules():
        if isinstance(module, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    return model, (torch.randn(shape),)


def _depends_on_its_input(model, x) -> bool:
    with torch.no_grad():
        a, b = model(x), model(torch.randn_like(x))
    return bool(torch.isfinite(a).all()) and float((a - b).std()) > 0.05 * float(a.std())


def test_every_block_has_a_tiny_size():
    assert set(TINY) == set(zoo.BLOCKS) <= set(zoo.MODELS)


@pytest.mark.parametrize("name", zoo.BLOCKS)
def test_each_block_runs_at_its_zoo_size_and_its_output_depends_on_its_input(name):
    model, (x,) = zoo.get(name)
    with torch.no_grad():
        y = model(x)
    assert y.shape[0] == 1
    assert _depends_on_its_input(model, x)


@pytest.mark.tvm
@pytest.mark.parametrize("name", zoo.BLOCKS)
def test_each_block_compiles_untuned_to_torchs_outputs(name):
    model, inputs = _tiny(name)
    imported = frontend.from_torch(model, inputs, name=name)
    extracted = tasks.extract(imported, targets.resolve(None))
    assert extracted.tasks
    _, error = compile.compile_checked(extracted)
    assert error < 1e-4


@pytest.fixture(scope="module")
def heldout_models():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    spec = importlib.util.spec_from_file_location("heldout_models", os.path.join(ROOT, "bench", "heldout_models.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(os.path.join(ROOT, "bench"))


@pytest.mark.parametrize("name", ["efficientnet-b0", "yolo"])
def test_each_network_calibrated_depends_on_its_input_and_imports(heldout_models, name):
    cls, _ = heldout_models.MODELS[name]
    torch.manual_seed(0)
    model, x = cls().eval(), torch.randn(1, 3, 64, 64)  # both take any multiple of 32
    with torch.no_grad():
        uncalibrated = model(x)
    heldout_models.calibrate(model, torch.randn(1, 3, 64, 64))
    assert _depends_on_its_input(model, x)
    imported = frontend.from_torch(model, (x,), name=name)
    assert imported.reference_outputs[0].shape == tuple(uncalibrated.shape)
