"""Benchmark models in plain PyTorch with random weights (nothing is downloaded).

Each entry builds ``(module, example_inputs)`` from a seed, so the same name and seed always give the same
weights and inputs. The architectures (:mod:`tunewise.zoo.architectures`) follow the published ones
(ResNet-18, MobileNetV2, SqueezeNet 1.1, VGG-11, a BERT-style encoder) at batch 1. The blocks modern networks
are made of, each at the size it has in its network, make a corpus of their own (:data:`BLOCKS`): ``mbconv``
(EfficientNet-B0's 24-channel stage at 56x56), ``c2f-sppf`` (a YOLOv8n-style backbone's last stage at 640x640
and its upsampling), ``convnext-block`` (ConvNeXt-T's first stage), ``llama-block`` (a decoder layer, 128
tokens of 256), ``swin-blocks`` (Swin-T's first stage), ``stem-conv`` (224x224 to 32 channels) and
``conformer-conv`` (128 frames of 256). ``tiny-cnn``, ``tiny-mlp`` and ``tiny-gpt`` are small models for demos
and tests, and ``inception-cells`` is a stack of wide parallel branches for multi-stream runtimes. The names
and input shapes are known without importing PyTorch.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunewise.errors import InputError


@dataclass(frozen=True)
class ZooEntry:
    """How to build one zoo model: its class in :mod:`tunewise.zoo.architectures` and the shape (and kind) of
    its single input."""

    architecture: str
    input_shape: tuple[int, ...]
    input_kind: str = "image"  # "image": float N(0, 1) (also a block's features); "tokens": int64 ids below ``vocab``
    vocab: int = 0

    def build(self):
        """A new ``torch.nn.Module`` of the architecture, with PyTorch's default initialisation."""
        from tunewise.zoo import architectures

        return getattr(architectures, self.architecture)()


MODELS: dict[str, ZooEntry] = {
    "resnet18": ZooEntry("ResNet18", (1, 3, 224, 224)),
    "mobilenetv2": ZooEntry("MobileNetV2", (1, 3, 224, 224)),
    "squeezenet1.1": ZooEntry("SqueezeNet11", (1, 3, 224, 224)),
    "vgg11": ZooEntry("VGG11", (1, 3, 224, 224)),
    "transformer": ZooEntry("TransformerEncoder", (1, 128), "tokens", vocab=8192),
    "inception-cells": ZooEntry("InceptionCells", (1, 3, 64, 64)),
    "mbconv": ZooEntry("MBConv", (1, 24, 56, 56)),
    "c2f-sppf": ZooEntry("C2fSPPF", (1, 128, 40, 40)),
    "convnext-block": ZooEntry("ConvNeXtBlock", (1, 96, 56, 56)),
    "llama-block": ZooEntry("LlamaBlock", (1, 128, 256)),
    "swin-blocks": ZooEntry("SwinBlocks", (1, 56 * 56, 96)),
    "stem-conv": ZooEntry("StemConv", (1, 3, 224, 224)),
    "conformer-conv": ZooEntry("ConformerConv", (1, 128, 256)),
    "tiny-cnn": ZooEntry("TinyCNN", (1, 3, 16, 16)),
    "tiny-mlp": ZooEntry("TinyMLP", (1, 64)),
    "tiny-gpt": ZooEntry("TinyGPT", (1, 8), "tokens", vocab=64),
}

BLOCKS = ("mbconv", "c2f-sppf", "convnext-block", "llama-block", "swin-blocks", "stem-conv", "conformer-conv")


def names() -> list[str]:
    """The zoo's model names, in a stable order."""
    return list(MODELS)


def get(name: str, *, seed: int = 0) -> tuple:
    """``(module, example inputs)``: zoo model ``name`` in eval mode with seeded random weights (a
    ``torch.nn.Module``), and a seeded example input (a tuple of one tensor)."""
    import torch

    if name not in MODELS:
        raise InputError(f"unknown zoo model {name!r}; choose one of: {', '.join(MODELS)}")
    entry = MODELS[name]
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = entry.build().eval()
        for module in model.modules():  # non-trivial batch-norm statistics, so folding them is checked
            if isinstance(module, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
    if entry.input_kind == "tokens":
        x = torch.randint(0, entry.vocab, entry.input_shape, generator=generator)
    else:
        x = torch.randn(entry.input_shape, generator=generator)
    return model, (x,)
