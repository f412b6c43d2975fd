"""Trimmer's cold-candidate filter (Borowiec et al., "Trimmer: Cost-Efficient Deep Learning Auto-tuning for
Cloud Datacenters", IEEE CLOUD 2022, s. IV-B); what it saves: ``bench/studies/cold_filter/findings.md``.

A *cold* candidate is one far slower than the search was finding at the time. Before a proposed candidate is
measured, the filter looks up its ``k`` most similar measured candidates of the same workload, and skips it
when all of them were cold (the session proposes another).

- **Cold** (:func:`cold_flags`): latency over ``ratio`` times the median of the task's ``window`` valid
  latencies measured around it (a robust local trend, where the paper fits LOESS); a failure counts as cold.
- **Embedding**: the paper's 32-32-1 net (ReLU, MSE, Adam at lr 1e-3) over the candidate's categorical
  features (:func:`trace_tokens`, averaged embeddings), trained on its log latency over the workload's best;
  its middle layer is the embedding, similarity the cosine.
- **Inverse epsilon-greedy**: the filter applies to a batch with probability ``epsilon``, multiplied by
  ``decay`` after each retraining (down to ``min_epsilon``).
"""

from __future__ import annotations

import json
import math
import statistics
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tunewise._numbers import is_number, is_whole
from tunewise.filters._base import CandidateFilter, Measured


def trace_tokens(record: str) -> list[str]:
    """The categorical features of a candidate, from its tuning record's JSON text: its design-space sketch
    (the instructions before post-processing, as one token) and each sampling decision (instruction index and
    kind, and each value it chose)."""
    instructions, decisions = json.loads(record)[0]
    kinds = [instruction[0] for instruction in instructions]
    end = kinds.index("EnterPostproc") if "EnterPostproc" in kinds else len(kinds)
    tokens = [f"sketch={zlib.crc32('/'.join(kinds[:end]).encode()):08x}"]
    for index, value in decisions:
        kind = kinds[index] if 0 <= index < len(kinds) else "?"
        values = value if isinstance(value, list) else [value]
        tokens += [f"{index}:{kind}:{j}={v}" for j, v in enumerate(values)]
    return tokens


def cold_flags(latencies: Sequence[float], *, window: int = 16, ratio: float = 2.0) -> list[bool]:
    """For one task's latencies in measurement order, which were cold: failed (``inf``), or more than ``ratio``
    times the median of the ``window`` valid latencies around it (half measured before it, half after; fewer
    at the ends, and none is cold with fewer than 3 around it)."""
    valid = [x for x in latencies if math.isfinite(x)]
    half, flags, j = window // 2, [], 0
    for latency in latencies:
        if not math.isfinite(latency):
            flags.append(True)
            continue
        around = valid[max(0, j - half):j] + valid[j + 1:j + 1 + half]
        flags.append(len(around) >= 3 and latency > ratio * statistics.median(around))
        j += 1
    return flags


@dataclass(frozen=True, kw_only=True)
class NetTraining:
    """How :class:`ColdFilter` trains its net: after each :meth:`~ColdFilter.tell` once ``min_samples`` valid
    latencies are known, for ``epochs`` full-batch steps on the latest ``memory`` of them, its tokens hashed
    into ``buckets`` embeddings."""

    epochs: int = 50
    min_samples: int = 32
    memory: int = 4096
    buckets: int = 4096


class ColdFilter(CandidateFilter):
    """Skips a proposed candidate when its ``k`` nearest measured candidates of the same workload (cosine
    similarity of the learnt embeddings) were all cold (see the module docstring for cold, the net and
    ``epsilon``). ``training`` (:class:`NetTraining`; ``None``: its defaults) says when and how the net is
    retrained.

    >>> cold = ColdFilter(k=3, seed=0)
    >>> cold.skip(7, ['[[[], []], null, null, null]'])  # nothing told yet: nothing skipped
    [False]
    """

    def __init__(self, *, k: int = 5, window: int = 16, ratio: float = 2.0, epsilon: float = 1.0,
                 decay: float = 0.95, min_epsilon: float = 0.05, training: NetTraining | None = None, seed: int = 0):
        training = training or NetTraining()
        epochs, min_samples, memory, buckets = training.epochs, training.min_samples, training.memory, training.buckets
        for name, value in (("k", k), ("window", window), ("epochs", epochs), ("min_samples", min_samples),
                            ("memory", memory), ("buckets", buckets)):
            if not is_whole(value) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, value, low, high in (("ratio", ratio, 1.0, math.inf), ("epsilon", epsilon, 0.0, 1.0),
                                       ("decay", decay, 0.0, 1.0), ("min_epsilon", min_epsilon, 0.0, 1.0)):
            if not is_number(value) or not low <= value <= high:
                raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}")
        self.k, self.window, self.ratio = k, window, ratio
        self.epsilon, self.decay, self.min_epsilon = float(epsilon), decay, min_epsilon
        self.epochs, self.min_samples, self.memory, self.buckets, self.seed = epochs, min_samples, memory, buckets, seed
        self._rng = np.random.default_rng(seed)
        self._measured: dict[int, list[tuple[list[int], float]]] = {}  # workload -> (token ids, latency), in order
        self._net = None
        self._embedded: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # workload -> (unit embeddings, cold flags)

    # -- learning ----------------------------------------------------------------------------------------
    def _ids(self, workload: int, record: str) -> list[int]:
        tokens = [f"workload={workload}", *trace_tokens(record)]
        return [zlib.crc32(t.encode()) % self.buckets for t in tokens]

    def tell(self, measured: Sequence[Measured]) -> None:
        for m in measured:
            self._measured.setdefault(m.workload, []).append((self._ids(m.workload, m.record), m.latency))
        valid = sum(math.isfinite(x) for items in self._measured.values() for _, x in items)
        if not measured or valid < self.min_samples:
            return
        self._train()
        self.epsilon = max(self.min_epsilon, self.epsilon * self.decay)

    def _train(self) -> None:
        import torch

        samples = []
        for items in self._measured.values():
            best = min((x for _, x in items if math.isfinite(x)), default=math.inf)
            samples += [(ids, math.log(x / best)) for ids, x in items if math.isfinite(x) and best > 0]
        samples = samples[-self.memory:]
        if self._net is None:
            with torch.random.fork_rng():  # the filter's own seed; the global generator is left as it was
                torch.manual_seed(self.seed)
                self._net = _net(self.buckets)
                self._optimizer = torch.optim.Adam(self._net.parameters(), lr=1e-3)
        ids, offsets = _batch([s for s, _ in samples])
        target = torch.tensor([[y] for _, y in samples], dtype=torch.float32)
        for _ in range(self.epochs):
            self._optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(self._net(ids, offsets), target)
            loss.backward()
            self._optimizer.step()
        self._embedded = {}

    def _embed(self, token_ids: list[list[int]]) -> np.ndarray:
        import torch

        with torch.no_grad():
            vectors = self._net.embed(*_batch(token_ids)).numpy()
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)

    # -- deciding ----------------------------------------------------------------------------------------
    def skip(self, workload: int, records: Sequence[str]) -> list[bool]:
        measured = self._measured.get(workload, [])
        if self._net is None or len(measured) < self.k or not records or self._rng.random() >= self.epsilon:
            return [False] * len(records)
        if workload not in self._embedded:
            flags = cold_flags([x for _, x in measured], window=self.window, ratio=self.ratio)
            self._embedded[workload] = (self._embed([ids for ids, _ in measured]), np.array(flags))
        known, cold = self._embedded[workload]
        similarity = self._embed([self._ids(workload, r) for r in records]) @ known.T
        nearest = np.argsort(-similarity, axis=1, kind="stable")[:, :self.k]
        return [bool(cold[row].all()) for row in nearest]


def _net(buckets: int):
    """The net: token ids -> 32 values (averaged token embeddings) -> 32 (the middle layer: the candidate's
    embedding, :meth:`embed`) -> the predicted log latency over the workload's best."""
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(buckets, 32, mode="mean")
            self.middle = nn.Sequential(nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
            self.head = nn.Linear(32, 1)

        def embed(self, ids, offsets):
            return self.middle(self.bag(ids, offsets))

        def forward(self, ids, offsets):
            return self.head(self.embed(ids, offsets))

    return Net()


def _batch(token_ids: list[list[int]]):
    import torch

    offsets = torch.tensor(np.cumsum([0, *[len(ids) for ids in token_ids[:-1]]]), dtype=torch.long)
    return torch.tensor([i for ids in token_ids for i in ids], dtype=torch.long), offsets
