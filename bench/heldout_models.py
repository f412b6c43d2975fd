"""Held-out models: kinds the zoo lacks, never tuned for, written out as ``.pt2`` and ONNX files.

    .venv/bin/python bench/heldout_models.py --out /tmp/heldout      # writes NAME.pt2 and NAME.onnx for each
    .venv/bin/tunewise tune /tmp/heldout/unet.pt2 --time-budget 3m

Plain torch, random weights seeded by ``--seed``:

- ``unet``: an encoder-decoder with strided convolutions, transposed convolutions, bilinear upsampling and skip
  concatenations (1x3x64x64);
- ``vit``: a small vision transformer, a patch-embedding convolution, a class token, pre-norm encoder blocks
  with GELU (1x3x64x64);
- ``mobile-silu``: depthwise-separable blocks with SiLU, Hardswish and squeeze-and-excitation (1x3x96x96);
- ``tcn``: a 1-D convolutional sequence model with dilated causal convolutions and a transposed 1-D
  convolution (1x16x256);
- ``grouped``: a ResNeXt-style network of grouped convolutions with channel shuffles (1x3x64x64);
- ``efficientnet-b0``: EfficientNet-B0 (Tan and Le 2019): its stem, the seven stages of MBConv blocks with
  squeeze-and-excitation and SiLU (expansion, channels, repeats, stride and kernel as in the paper), its 1280-channel
  head and a 1000-class classifier (1x3x224x224);
- ``yolo``: a YOLOv8n-style detector at 320x320 (1x3x320x320): a C2f backbone (widths 16-256) with SPPF, a PAN
  neck (nearest upsampling and concatenation top-down, stride-2 convolutions bottom-up, C2f at each step) and a
  1x1 prediction of 4 box coordinates and 80 classes at strides 8, 16 and 32, flattened and concatenated
  (1x84x2100);
- ``resnet50``: ResNet-50 (He et al. 2016): bottleneck blocks of 3, 4, 6 and 3, widths 256-2048, a
  1000-class classifier (1x3x224x224);
- ``minilm``: a BERT-class encoder on token embeddings (1x128x384): 6 post-norm layers of 6 heads, GELU
  feed-forward of 1536, the first token pooled through a dense layer and tanh.

``efficientnet-b0`` and ``yolo`` come from the zoo's blocks (:mod:`tunewise.zoo.architectures`). These two and
``resnet50`` take their batch-norm statistics from a seeded random input (:func:`calibrate`), so that a deep stack
of random layers neither fades out nor blows up.
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn
from torch.nn import functional as F

from tunewise.zoo.architectures import SPPF, C2f, MBConv


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.enc3 = nn.Sequential(nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU())
        self.up3 = nn.ConvTranspose2d(64, 32, 2, stride=2)
        self.dec2 = nn.Sequential(nn.Conv2d(64, 32, 3, padding=1), nn.ReLU())
        self.dec1 = nn.Sequential(nn.Conv2d(48, 16, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        e3 = self.enc3(e2)
        d2 = self.dec2(torch.cat([self.up3(e3), e2], dim=1))
        d1 = F.interpolate(d2, scale_factor=2, mode="bilinear", align_corners=False)
        return self.head(self.dec1(torch.cat([d1, e1], dim=1)))


class ViT(nn.Module):
    def __init__(self, patch: int = 8, dim: int = 128, depth: int = 4, heads: int = 4, classes: int = 10):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.positions = nn.Parameter(torch.randn(1, (64 // patch) ** 2 + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        tokens = self.embed(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), tokens], dim=1) + self.positions
        return self.head(self.norm(self.encoder(tokens))[:, 0])


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(channels, channels // 4, 1), nn.Conv2d(channels // 4, channels, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.expand(F.silu(self.reduce(F.adaptive_avg_pool2d(x, 1)))))


class SeparableBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, activation: type[nn.Module]):
        super().__init__()
        hidden = 4 * cin
        self.body = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), activation(),
            nn.Conv2d(hidden, hidden, 3, stride=stride, padding=1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
            activation(), SqueezeExcite(hidden), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileSiLU(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16),
                                  nn.Hardswish())
        self.blocks = nn.Sequential(SeparableBlock(16, 24, 2, nn.SiLU), SeparableBlock(24, 24, 1, nn.SiLU),
                                    SeparableBlock(24, 40, 2, nn.Hardswish), SeparableBlock(40, 40, 1, nn.Hardswish))
        self.head = nn.Linear(40, classes)

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


class TCN(nn.Module):
    def __init__(self, channels: int = 64, levels: int = 4):
        super().__init__()
        self.inp = nn.Conv1d(16, channels, 1)
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, 3, dilation=2 ** i) for i in range(levels))
        self.down = nn.Conv1d(channels, channels, 4, stride=2, padding=1)
        self.up = nn.ConvTranspose1d(channels, channels, 4, stride=2, padding=1)
        self.out = nn.Conv1d(channels, 8, 1)

    def forward(self, x):
        h = self.inp(x)
        for i, conv in enumerate(self.convs):
            h = h + F.relu(conv(F.pad(h, (2 * 2 ** i, 0))))  # causal: padded on the left only
        return self.out(self.up(F.relu(self.down(h))))


class Grouped(nn.Module):
    def __init__(self, classes: int = 10, groups: int = 4):
        super().__init__()
        self.groups = groups
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.stages = nn.ModuleList(nn.Sequential(
            nn.Conv2d(c, c, 1, groups=groups), nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1, groups=groups * 2), nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, c, 1, groups=groups), nn.BatchNorm2d(c)) for c in (32, 32))
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        h = self.stem(x)
        for stage in self.stages:
            n, c, height, width = h.shape
            shuffled = h.view(n, self.groups, c // self.groups, height, width).transpose(1, 2).reshape(n, c, height,
                                                                                                      width)
            h = F.relu(h + stage(shuffled))
        return self.head(F.adaptive_avg_pool2d(h, 1).flatten(1))


def conv_bn_silu(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class EfficientNetB0(nn.Module):
    STAGES = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5),
              (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]  # expansion, channels, repeats, stride, kernel

    def __init__(self, classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [conv_bn_silu(3, 32, 3, 2)]
        cin = 32
        for expand, cout, repeats, stride, kernel in self.STAGES:
            for i in range(repeats):
                layers.append(MBConv(cin, cout, expand=expand, kernel=kernel, stride=stride if i == 0 else 1))
                cin = cout
        layers.append(conv_bn_silu(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        return self.classifier(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


class YOLO(nn.Module):
    def __init__(self, classes: int = 80):
        super().__init__()
        self.p2 = nn.Sequential(conv_bn_silu(3, 16, 3, 2), conv_bn_silu(16, 32, 3, 2), C2f(32, 32))
        self.p3 = nn.Sequential(conv_bn_silu(32, 64, 3, 2), C2f(64, 64, n=2))
        self.p4 = nn.Sequential(conv_bn_silu(64, 128, 3, 2), C2f(128, 128, n=2))
        self.p5 = nn.Sequential(conv_bn_silu(128, 256, 3, 2), C2f(256, 256), SPPF(256, 256))
        self.top4, self.top3 = C2f(384, 128, shortcut=False), C2f(192, 64, shortcut=False)
        self.down3, self.bottom4 = conv_bn_silu(64, 64, 3, 2), C2f(192, 128, shortcut=False)
        self.down4, self.bottom5 = conv_bn_silu(128, 128, 3, 2), C2f(384, 256, shortcut=False)
        self.heads = nn.ModuleList(nn.Conv2d(c, 4 + classes, 1) for c in (64, 128, 256))

    def forward(self, x):
        p3 = self.p3(self.p2(x))
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        t4 = self.top4(torch.cat([F.interpolate(p5, scale_factor=2.0, mode="nearest"), p4], 1))
        n3 = self.top3(torch.cat([F.interpolate(t4, scale_factor=2.0, mode="nearest"), p3], 1))
        n4 = self.bottom4(torch.cat([self.down3(n3), t4], 1))
        n5 = self.bottom5(torch.cat([self.down4(n4), p5], 1))
        return torch.cat([head(n).flatten(2) for head, n in zip(self.heads, (n3, n4, n5), strict=True)], 2)


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = 4 * width
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Identity() if cin == cout and stride == 1 else
                     nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x):
        return F.relu(self.body(x) + self.skip(x))


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for stage, (width, repeats) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
            for r in range(repeats):
                layers.append(Bottleneck(cin, width, 2 if r == 0 and stage > 0 else 1))
                cin = 4 * width
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


class MiniLM(nn.Module):
    def __init__(self, dim: int = 384, heads: int = 6, layers: int = 6, hidden: int = 1536):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        layer = nn.TransformerEncoderLayer(dim, heads, hidden, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pool = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.tanh(self.pool(self.encoder(self.norm(x))[:, 0]))


MODELS = {"unet": (UNet, (1, 3, 64, 64)), "vit": (ViT, (1, 3, 64, 64)), "mobile-silu": (MobileSiLU, (1, 3, 96, 96)),
          "tcn": (TCN, (1, 16, 256)), "grouped": (Grouped, (1, 3, 64, 64)),
          "efficientnet-b0": (EfficientNetB0, (1, 3, 224, 224)), "yolo": (YOLO, (1, 3, 320, 320)),
          "resnet50": (ResNet50, (1, 3, 224, 224)), "minilm": (MiniLM, (1, 128, 384))}
CALIBRATED = ("efficientnet-b0", "yolo", "resnet50")  # full-size networks: batch norm set by calibrate


def calibrate(model: nn.Module, x: torch.Tensor) -> nn.Module:
    """``model`` in eval mode with each batch norm's running statistics those of its input when ``model`` runs
    on ``x``: every batch norm then normalises, as in a trained network."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: one call sets the statistics of that call
    model.train()
    with torch.no_grad():
        model(x)
    for norm in norms:
        norm.momentum = 0.1
    return model.eval()


def build(name: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """Model ``name`` in eval mode with weights seeded by ``seed``, and its example input."""
    cls, shape = MODELS[name]
    torch.manual_seed(seed)
    model = cls().eval()
    example = (torch.randn(*shape),)
    if name in CALIBRATED:
        calibrate(model, torch.randn(*shape))
    return model, example


def write(name: str, folder: str, seed: int = 0) -> tuple[str, str]:
    """Model ``name`` with weights seeded by ``seed``, saved as ``folder/NAME.pt2`` (its ``torch.export``
    program) and ``folder/NAME.onnx``; returns both paths."""
    model, example = build(name, seed)
    pt2, onnx = os.path.join(folder, f"{name}.pt2"), os.path.join(folder, f"{name}.onnx")
    torch.export.save(torch.export.export(model, example), pt2)
    torch.onnx.export(model, example, onnx, dynamo=False, input_names=["x"])
    return pt2, onnx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="heldout-models")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        for path in write(name, args.out, args.seed):
            print(path)


if __name__ == "__main__":
    main()
