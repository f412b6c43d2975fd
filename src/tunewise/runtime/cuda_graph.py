"""The plain model captured into one CUDA graph on one stream: the baseline that Nimble's multi-stream graph
(``engine.aot``) is measured against, and a reference a GPU-tuned model is timed beside."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.utils import _pytree as pytree

from tunewise.runtime.dag import check_inputs


def single_stream(model: nn.Module, example_inputs: Sequence[torch.Tensor], *,
                  warmup_runs: int = 3) -> Callable[..., object]:
    """``model`` (on the GPU, in the mode it is in) captured with ``example_inputs`` into one CUDA graph on one
    stream, after ``warmup_runs`` runs on a side stream (cuDNN's algorithm choice, lazy initialisation). A call
    copies its inputs into the graph's input buffers, replays the graph and returns clones of its outputs."""
    buffers = tuple(x.detach().clone() for x in check_inputs(example_inputs))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad():
        with torch.cuda.stream(side):
            for _ in range(warmup_runs):
                model(*buffers)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = model(*buffers)
    flat, spec = pytree.tree_flatten(outputs)

    def run(*inputs: torch.Tensor):
        for buffer, x in zip(buffers, inputs, strict=True):
            buffer.copy_(x)
        graph.replay()
        return pytree.tree_unflatten([o.clone() if isinstance(o, torch.Tensor) else o for o in flat], spec)

    return run
