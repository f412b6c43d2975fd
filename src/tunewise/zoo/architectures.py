"""The zoo's architectures in plain PyTorch, after the published ones (ResNet-18, MobileNetV2, SqueezeNet 1.1,
VGG-11, a BERT-style encoder), the blocks modern networks are made of (MBConv, C2f with SPPF, ConvNeXt, a
LLaMA decoder layer, Swin window attention, a stem convolution, Conformer's convolution module), and small
models for demos and tests."""

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


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation (Hu et al. 2018) as EfficientNet has it: global average, 1x1 reduction to
    ``squeezed`` channels, SiLU, 1x1 expansion, sigmoid gate on the input."""

    def __init__(self, channels: int, squeezed: int):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(channels, squeezed, 1), nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.expand(nn.functional.silu(self.reduce(s))))


class MBConv(nn.Module):
    """MBConv (Tan and Le 2019, EfficientNet): 1x1 expansion (none when ``expand`` is 1), ``kernel`` x ``kernel``
    depthwise convolution, squeeze-and-excitation to a quarter of the input channels, 1x1 projection, SiLU
    after batch norm, and a residual connection where the shapes allow."""

    def __init__(self, cin: int = 24, cout: int = 24, *, expand: int = 6, kernel: int = 3, stride: int = 1):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = [] if expand == 1 else [_conv_bn(cin, hidden, 1, act=nn.SiLU)]
        layers += [_conv_bn(hidden, hidden, kernel, stride, groups=hidden, act=nn.SiLU),
                   SqueezeExcite(hidden, max(1, cin // 4)), _conv_bn(hidden, cout, 1, act=None)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class _Bottleneck(nn.Module):
    def __init__(self, channels: int, shortcut: bool):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(channels, channels, 3, act=nn.SiLU),
                                  _conv_bn(channels, channels, 3, act=nn.SiLU))
        self.shortcut = shortcut

    def forward(self, x):
        return x + self.body(x) if self.shortcut else self.body(x)


class C2f(nn.Module):
    """YOLOv8's C2f: a 1x1 convolution split in two halves (``chunk``), ``n`` bottlenecks chained on the second,
    every intermediate concatenated and joined by a 1x1 convolution; convolutions with batch norm and SiLU."""

    def __init__(self, cin: int, cout: int, *, n: int = 1, shortcut: bool = True):
        super().__init__()
        half = cout // 2
        self.enter = _conv_bn(cin, 2 * half, 1, act=nn.SiLU)
        self.bottlenecks = nn.ModuleList(_Bottleneck(half, shortcut) for _ in range(n))
        self.leave = _conv_bn((2 + n) * half, cout, 1, act=nn.SiLU)

    def forward(self, x):
        parts = list(self.enter(x).chunk(2, 1))
        for bottleneck in self.bottlenecks:
            parts.append(bottleneck(parts[-1]))
        return self.leave(torch.cat(parts, 1))


class SPPF(nn.Module):
    """YOLOv5's fast spatial pyramid pooling: a 1x1 convolution halving the channels, three 5x5 max-pools in a
    chain (stride 1), the four maps concatenated and a 1x1 convolution."""

    def __init__(self, cin: int, cout: int, *, kernel: int = 5):
        super().__init__()
        self.enter = _conv_bn(cin, cin // 2, 1, act=nn.SiLU)
        self.pool = nn.MaxPool2d(kernel, 1, kernel // 2)
        self.leave = _conv_bn(cin // 2 * 4, cout, 1, act=nn.SiLU)

    def forward(self, x):
        maps = [self.enter(x)]
        for _ in range(3):
            maps.append(self.pool(maps[-1]))
        return self.leave(torch.cat(maps, 1))


class C2fSPPF(nn.Module):
    """The deepest stage of a YOLOv8-style backbone and the first step of its neck: a stride-2 convolution, C2f and
    SPPF at twice the channels, nearest upsampling x2 concatenated with the stage's input, and a C2f (no
    shortcut) back to ``channels``."""

    def __init__(self, channels: int = 128):
        super().__init__()
        wide = 2 * channels
        self.stage = nn.Sequential(_conv_bn(channels, wide, 3, 2, act=nn.SiLU), C2f(wide, wide), SPPF(wide, wide))
        self.neck = C2f(wide + channels, channels, shortcut=False)

    def forward(self, x):
        up = nn.functional.interpolate(self.stage(x), scale_factor=2.0, mode="nearest")
        return self.neck(torch.cat([up, x], 1))


class ConvNeXtBlock(nn.Module):
    """A ConvNeXt block (Liu et al. 2022): 7x7 depthwise convolution, LayerNorm over channels-last, a 1x1 MLP of
    four times the channels with GELU (as linear layers), layer scale, residual. The layer scale starts in
    [0.5, 1) rather than the paper's 1e-6, so that the branch shows in the output."""

    def __init__(self, dim: int = 96):
        super().__init__()
        self.depthwise = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.scale = nn.Parameter(0.5 + 0.5 * torch.rand(dim))

    def forward(self, x):
        y = self.mlp(self.norm(self.depthwise(x).permute(0, 2, 3, 1)))
        return x + (self.scale * y).permute(0, 3, 1, 2)


class _RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    """A LLaMA decoder layer (Touvron et al. 2023) on hidden states ``(batch, seq, dim)``: RMSNorm, rotary
    position embedding of queries and keys, causal attention (``scaled_dot_product_attention``), residual;
    RMSNorm, SiLU-gated MLP of ``hidden`` channels, residual. No biases."""

    def __init__(self, dim: int = 256, heads: int = 4, hidden: int = 768, seq: int = 128):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = _RMSNorm(dim), _RMSNorm(dim)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        head = dim // heads
        angles = torch.outer(torch.arange(seq, dtype=torch.float32),
                             10000.0 ** (-torch.arange(0, head, 2, dtype=torch.float32) / head))
        self.register_buffer("cos", torch.cat([angles.cos()] * 2, -1), persistent=False)
        self.register_buffer("sin", torch.cat([angles.sin()] * 2, -1), persistent=False)

    def _rotate(self, x):
        first, second = x.chunk(2, -1)
        return x * self.cos + torch.cat([-second, first], -1) * self.sin

    def _heads(self, x):
        b, s, d = x.shape
        return x.view(b, s, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x):
        b, s, d = x.shape
        h = self.norm1(x)
        q, k, v = self._rotate(self._heads(self.q(h))), self._rotate(self._heads(self.k(h))), self._heads(self.v(h))
        attended = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(attended.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class _WindowAttention(nn.Module):
    """Multi-head self-attention within ``window`` x ``window`` windows, with a learnt relative position bias
    (a table gathered by a fixed index) and an optional additive mask per window."""

    def __init__(self, dim: int, heads: int, window: int):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        relative = coords[:, :, None] - coords[:, None, :] + window - 1
        self.register_buffer("index", (relative[0] * (2 * window - 1) + relative[1]).flatten(), persistent=False)

    def forward(self, x, mask=None):
        windows, n, c = x.shape
        q, k, v = self.qkv(x).reshape(windows, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q * (c // self.heads) ** -0.5) @ k.transpose(-2, -1)
        scores = scores + self.table[self.index].view(n, n, self.heads).permute(2, 0, 1)
        if mask is not None:
            scores = scores + mask.unsqueeze(1)
        return self.proj((torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(windows, n, c))


class _SwinBlock(nn.Module):
    def __init__(self, dim: int, heads: int, resolution: int, window: int, shift: int):
        super().__init__()
        self.resolution, self.window, self.shift = resolution, window, shift
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attention = _WindowAttention(dim, heads, window)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        if shift:  # the shifted windows that wrap around join regions that attend only within themselves
            regions = torch.zeros(1, resolution, resolution, 1)
            cuts = (slice(0, -window), slice(-window, -shift), slice(-shift, None))
            for i, (rows, cols) in enumerate((r, c) for r in cuts for c in cuts):
                regions[:, rows, cols, :] = i
            labels = self._partition(regions).squeeze(-1)
            mask = (labels[:, None, :] != labels[:, :, None]).float() * -100.0
            self.register_buffer("mask", mask, persistent=False)
        else:
            self.mask = None

    def _partition(self, x):
        b, h, w, c = x.shape
        s = self.window
        return x.view(b, h // s, s, w // s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, s * s, c)

    def _merge(self, windows, b: int, c: int):
        s, r = self.window, self.resolution
        return windows.view(b, r // s, r // s, s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(b, r, r, c)

    def forward(self, x):
        b, length, c = x.shape
        h = self.norm1(x).view(b, self.resolution, self.resolution, c)
        if self.shift:
            h = torch.roll(h, (-self.shift, -self.shift), (1, 2))
        h = self._merge(self.attention(self._partition(h), self.mask), b, c)
        if self.shift:
            h = torch.roll(h, (self.shift, self.shift), (1, 2))
        x = x + h.reshape(b, length, c)
        return x + self.mlp(self.norm2(x))


class SwinBlocks(nn.Module):
    """Two Swin Transformer blocks (Liu et al. 2021) on tokens ``(batch, resolution**2, dim)``: window attention
    with relative position bias, then the same with windows shifted by half a window (``torch.roll``, masked
    where a window wraps around); pre-norm, GELU MLP of four times ``dim``."""

    def __init__(self, dim: int = 96, heads: int = 3, resolution: int = 56, window: int = 7):
        super().__init__()
        self.blocks = nn.Sequential(_SwinBlock(dim, heads, resolution, window, 0),
                                    _SwinBlock(dim, heads, resolution, window, window // 2))

    def forward(self, x):
        return self.blocks(x)


class StemConv(nn.Module):
    """A network's stem: a 3x3 stride-2 convolution from 3 channels, batch norm, SiLU."""

    def __init__(self, channels: int = 32):
        super().__init__()
        self.body = _conv_bn(3, channels, 3, 2, act=nn.SiLU)

    def forward(self, x):
        return self.body(x)


class ConformerConv(nn.Module):
    """Conformer's convolution module (Gulati et al. 2020) on ``(batch, time, dim)``: LayerNorm, pointwise
    convolution to twice ``dim``, GLU, depthwise Conv1d of ``kernel``, BatchNorm, Swish (SiLU), pointwise
    convolution, residual."""

    def __init__(self, dim: int = 256, kernel: int = 31):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.expand = nn.Conv1d(dim, 2 * dim, 1)
        self.depthwise = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.bn = nn.BatchNorm1d(dim)
        self.project = nn.Conv1d(dim, dim, 1)

    def forward(self, x):
        y = nn.functional.glu(self.expand(self.norm(x).transpose(1, 2)), dim=1)
        return x + self.project(nn.functional.silu(self.bn(self.depthwise(y)))).transpose(1, 2)
