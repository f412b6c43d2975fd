"""Small models for the torch.compile backend's tests, made alike (seeded) in the test process and in the
processes it starts."""

import torch


class Branching(torch.nn.Module):
    """A two-layer perceptron whose forward branches in Python on a value it computed (``.item()``): Dynamo
    captures it as two graphs, one before the branch and one after."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16)

    def forward(self, x):
        y = torch.relu(self.fc1(x))
        if y.sum().item() > 0:
            y = y * 2
        return self.fc2(y)


class LogGamma(torch.nn.Module):
    """A linear layer then ``lgamma``, which TVM's PyTorch importer has no translation for."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.lgamma(self.fc(x).abs() + 1)


def branching() -> tuple[torch.nn.Module, torch.Tensor]:
    """A seeded :class:`Branching` in eval mode and an input for it."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Branching().eval(), torch.randn(4, 32)
