"""The zoo's architectures in plain PyTorch, after the published ones (ResNet-18, MobileNetV2, SqueezeNet 1.1,
VGG-11, a BERT-style encoder), and small models for demos and tests."""

from __future__ import annotations

import torch
from torch import nn


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: type | None = nn.ReLU):
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, padding=k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(cin, cout, 3, stride), _conv_bn(cout, cout, 3, act=None))
        self.shortcut = _conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else None

    def forward(self, x):
        identity = x if self.shortcut is None else self.shortcut(x)
        return torch.relu(self.body(x) + identity)


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016), ImageNet layout, 1000 classes."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [_BasicBlock(cin, cout, stride), _BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_conv_bn(cin, hidden, 1, act=nn.ReLU6))
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   _conv_bn(hidden, cout, 1, act=None)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al. 2018), width 1.0, 1000 classes."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        layers: list[nn.Module] = [_conv_bn(3, 32, 3, 2, act=nn.ReLU6)]
        cin = 32
        for expand, cout, repeats, stride in settings:
            for i in range(repeats):
                layers.append(_InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        layers.append(_conv_bn(cin, 1280, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


class _Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1 = nn.Conv2d(squeeze, expand, 1)
        self.expand3 = nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        s = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.expand1(s)), torch.relu(self.expand3(s))], 1)


class SqueezeNet11(nn.Module):
    """SqueezeNet 1.1 (Iandola et al. 2016), 1000 classes."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(), pool,
            _Fire(64, 16, 64), _Fire(128, 16, 64), pool,
            _Fire(128, 32, 128), _Fire(256, 32, 128), pool,
            _Fire(256, 48, 192), _Fire(384, 48, 192), _Fire(384, 64, 256), _Fire(512, 64, 256),
        )
        self.classifier = nn.Conv2d(512, num_classes, 1)

    def forward(self, x):
        x = torch.relu(self.classifier(self.features(x)))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)


class VGG11(nn.Module):
    """VGG-11 (configuration A of Simonyan and Zisserman 2015), 1000 classes."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU()]
                cin = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class _EncoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.ffn = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-2, -1) * (h // self.heads) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.proj(y))
        return self.norm2(x + self.ffn(x))


class TransformerEncoder(nn.Module):
    """BERT-style encoder: token + position embeddings, post-norm layers, pooled first token."""

    def __init__(self, vocab: int = 8192, seq: int = 128, hidden: int = 256, layers: int = 4,
                 heads: int = 4, ffn: int = 1024):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Parameter(torch.randn(1, seq, hidden) * 0.02)
        self.norm = nn.LayerNorm(hidden)
        self.layers = nn.Sequential(*[_EncoderLayer(hidden, heads, ffn) for _ in range(layers)])
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, ids):
        x = self.layers(self.norm(self.tokens(ids) + self.positions))
        return torch.tanh(self.pool(x[:, 0]))


class InceptionCells(nn.Module):
    """A stack of Inception-style cells: four parallel branches per cell, joined by concatenation."""

    def __init__(self, channels: int = 64, cells: int = 4, num_classes: int = 10):
        super().__init__()
        self.stem = _conv_bn(3, channels, 3, 2)
        c = channels // 4
        self.cells = nn.ModuleList(
            nn.ModuleList([
                _conv_bn(channels, c, 1),
                nn.Sequential(_conv_bn(channels, c, 1), _conv_bn(c, c, 3)),
                nn.Sequential(_conv_bn(channels, c, 1), _conv_bn(c, c, 3), _conv_bn(c, c, 3)),
                nn.Sequential(nn.MaxPool2d(3, 1, 1), _conv_bn(channels, c, 1)),
            ])
            for _ in range(cells)
        )
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self.stem(x)
        for branches in self.cells:
            x = torch.cat([branch(x) for branch in branches], 1)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class TinyCNN(nn.Module):
    """A conv-bn-relu pair, pooling and a classifier: seconds to tune, for demos and tests."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(_conv_bn(3, 16, 3), _conv_bn(16, 32, 3, 2))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


class TinyGPT(nn.Module):
    """A GPT-style decoder: token and position embeddings, ``nn.TransformerEncoderLayer`` blocks under a causal
    mask, and a language-model head tied to the token embedding; logits for every position."""

    def __init__(self, vocab: int = 64, seq: int = 8, hidden: int = 16, layers: int = 1, heads: int = 2):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Parameter(torch.randn(seq, hidden) * 0.02)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(hidden, heads, 2 * hidden, dropout=0.0,
                                                               batch_first=True, norm_first=True)
                                    for _ in range(layers))
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.tokens.weight
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions
        for block in self.blocks:
            x = block(x, src_mask=self.mask, is_causal=True)
        return self.head(x)


class TinyMLP(nn.Module):
    """Two dense layers: the smallest model with more than one tunable operator."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16))

    def forward(self, x):
        return self.body(x)
