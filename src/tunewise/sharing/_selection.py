"""Which tasks are tuned and which take their schedules from a representative (the TVM RFC "Selective tuning").

:func:`select` groups tasks by their pairwise :func:`~tunewise.sharing.similarity` as the RFC does: a graph
with an edge between two tasks whose similarity is at least ``threshold`` (0.01), its maximal cliques, and
each task assigned to the clique, among those that hold it, with the largest weight, the sum of the
similarities of the clique's edges (ties: the clique whose sorted members come first). The tasks assigned
to one clique form a group. A group's representative is the member with the largest similarity to the
other members weighted by its share of the model's latency: ``share * sum of similarities`` (ties: the
larger share, then the lower index). :func:`select_tasks` applies it to a model's tasks. Pure Python: tested
and replayed without TVM.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tunewise.sharing._similarity import Signature, similarity

THRESHOLD = 0.01
"""The similarity from which two tasks are joined by an edge (the RFC's)."""


@dataclass(frozen=True)
class Selection:
    """``group[k]`` is task ``k``'s group number (groups numbered by their lowest task), ``source[k]`` the
    representative task ``k`` takes its schedules from (``None`` for a representative, a task tuned itself)."""

    group: tuple[int, ...]
    source: tuple[int | None, ...]

    def representative(self, k: int) -> int:
        """The representative of task ``k``'s group (``k`` itself when it is one)."""
        return k if self.source[k] is None else self.source[k]


def select(matrix: Sequence[Sequence[float]], shares: Sequence[float], *,
           threshold: float = THRESHOLD) -> Selection:
    """Groups and representatives (see the module docstring) of tasks with pairwise similarities ``matrix``
    (symmetric) and latency shares ``shares`` (weight x default latency, for instance)."""
    n = len(shares)
    neighbours = [{j for j in range(n) if j != i and matrix[i][j] >= threshold} for i in range(n)]
    cliques = _maximal_cliques(neighbours)

    def weight(clique: tuple[int, ...]) -> float:
        return sum(matrix[i][j] for a, i in enumerate(clique) for j in clique[a + 1:])

    assigned = [max((c for c in cliques if i in c), key=lambda c: (weight(c), [-x for x in c])) for i in range(n)]
    group = [min(j for j in range(n) if assigned[j] == assigned[i]) for i in range(n)]
    source: list[int | None] = [None] * n
    for first in sorted(set(group)):
        members = [i for i in range(n) if group[i] == first]
        if len(members) == 1:
            continue

        def score(i: int, members=members) -> tuple[float, float, int]:
            total = sum(matrix[i][j] for j in members if j != i)
            return (shares[i] * total if total > 0 else 0.0, shares[i], -i)

        representative = max(members, key=score)
        for i in members:
            source[i] = None if i == representative else representative
    return Selection(tuple(group), tuple(source))


def _maximal_cliques(neighbours: Sequence[set[int]]) -> list[tuple[int, ...]]:
    """Every maximal clique (sorted tuples) of the graph ``neighbours`` (Bron-Kerbosch with a pivot)."""
    found: list[tuple[int, ...]] = []

    def extend(clique: set[int], candidates: set[int], excluded: set[int]) -> None:
        if not candidates and not excluded:
            found.append(tuple(sorted(clique)))
            return
        pivot = max(candidates | excluded, key=lambda u: (len(candidates & neighbours[u]), -u))
        for v in sorted(candidates - neighbours[pivot]):
            extend(clique | {v}, candidates & neighbours[v], excluded & neighbours[v])
            candidates = candidates - {v}
            excluded = excluded | {v}

    extend(set(), set(range(len(neighbours))), set())
    return found


def latency_shares(tasks) -> list[float]:
    """Each task's share of the model's latency, as :func:`select_tasks` weighs representatives: weight x default
    latency, or weight x FLOPs while some default latency is unknown or failed (``inf``)."""
    if all(math.isfinite(t.default_latency) for t in tasks):
        return [t.weight * t.default_latency for t in tasks]
    return [t.weight * t.flops for t in tasks]


def flop_shares(tasks) -> list[float]:
    """Each task's share of the model's FLOPs (weight x FLOPs over their sum; zeros when the model has none), as
    :class:`~tunewise.sharing.Members` tells the members worth a search of their own."""
    total = sum(t.weight * t.flops for t in tasks)
    return [t.weight * t.flops / total if total > 0 else 0.0 for t in tasks]


def select_tasks(tasks, signatures: Sequence[Signature], *, threshold: float = THRESHOLD) -> Selection:
    """:func:`select` over ``tasks`` (with ``weight``, ``flops`` and ``default_latency``:
    :class:`tunewise.lowering.tasks.Task`)
    whose design spaces have ``signatures`` (:func:`~tunewise.sharing.task_signature`), weighed by
    :func:`latency_shares`."""
    matrix = [[similarity(a, b) for b in signatures] for a in signatures]
    return select(matrix, latency_shares(tasks), threshold=threshold)
