"""Write ResNet-18's four 3x3 stride-1 convolutions (with bias and ReLU, NCHW, batch 1) as ``.pt2`` files, one
model each, for benchmarks that compare how one convolution tunes (``convC.pt2``, C the channels: 64 on 56x56,
128 on 28x28, 256 on 14x14, 512 on 7x7). Seeded random weights::

    .venv/bin/python bench/studies/winograd/resnet_convs.py --out /tmp/convs
"""

from __future__ import annotations

import argparse
import os

import torch

SHAPES = {64: 56, 128: 28, 256: 14, 512: 7}  # channels: height and width


class Convolution(torch.nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the .pt2 files")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    for channels, size in SHAPES.items():
        model = Convolution(channels).eval()
        program = torch.export.export(model, (torch.randn(1, channels, size, size),))
        path = os.path.join(args.out, f"conv{channels}.pt2")
        torch.export.save(program, path)
        print(path)


if __name__ == "__main__":
    main()
