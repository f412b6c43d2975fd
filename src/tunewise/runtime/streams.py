"""Nimble's stream assignment: the operators of a DAG onto GPU streams with the fewest synchronisations.

Kwon et al., "Nimble: Lightweight and Parallel GPU Task Scheduling for Deep Learning", NeurIPS 2020, s. 3.2.
Pure Python over networkx: no torch, no GPU. For a DAG ``G`` of operators and data dependencies, the streams
are the paths that a maximum matching (Hopcroft-Karp) of the bipartite graph of ``R``, the transitive
reduction of ``G``, links; each edge of ``R`` between two streams is one synchronisation. The plan
serialises nothing that could run concurrently, and no plan has fewer synchronisations. ``merge=True`` (the
authors' second matching) concatenates chains that wholly precede one another: the fewest streams made of
whole chains, with the same synchronisations. Stream 0 is the capture stream; every other stream forks from
it before the first operator and joins it after the last, as CUDA graph capture over several streams needs.

>>> dag = nx.DiGraph([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
>>> plan = plan_streams(dag)
>>> plan.streams, len(plan.syncs), plan.width
((('a', 'b', 'd'), ('c',)), 2, 2)
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import networkx as nx
from networkx.algorithms.bipartite import hopcroft_karp_matching

from tunewise.errors import InputError

CAPTURE_STREAM = 0


@dataclass(frozen=True)
class Sync:
    """One cross-stream dependency: an event recorded on ``src_stream`` right after ``src`` is issued, and
    waited on by ``dst_stream`` right before ``dst`` is issued."""

    src: Hashable
    dst: Hashable
    src_stream: int
    dst_stream: int


@dataclass(frozen=True)
class Fork:
    """Side stream ``stream`` waits for all work issued so far on the capture stream."""

    stream: int


@dataclass(frozen=True)
class Launch:
    """Issue operator ``node`` on ``stream``."""

    node: Hashable
    stream: int


@dataclass(frozen=True)
class Record:
    """Record the event of ``StreamPlan.syncs[sync]`` on ``stream``."""

    sync: int
    stream: int


@dataclass(frozen=True)
class Wait:
    """Make ``stream`` wait for the event of ``StreamPlan.syncs[sync]``, recorded by an earlier step."""

    sync: int
    stream: int


@dataclass(frozen=True)
class Join:
    """The capture stream waits for all work issued so far on side stream ``stream``."""

    stream: int


Step = Fork | Launch | Record | Wait | Join


@dataclass(frozen=True)
class StreamPlan:
    """Which stream runs each operator and which cross-stream events order them.

    ``order`` is the host's issue order, a topological order of the DAG; ``streams[s]`` lists the operators of
    stream ``s`` in that order, and every operator is on exactly one stream; stream 0 is the capture stream.
    ``reduced_edges`` is the number of edges of the transitive reduction and ``width`` the DAG's maximum
    concurrency (its largest antichain). ``merged`` tells whether chains were merged into fewer streams.
    """

    order: tuple[Hashable, ...]
    streams: tuple[tuple[Hashable, ...], ...]
    syncs: tuple[Sync, ...]
    reduced_edges: int
    width: int
    merged: bool

    def stream_of(self) -> dict[Hashable, int]:
        """Each operator's stream."""
        return {node: s for s, nodes in enumerate(self.streams) for node in nodes}

    def program(self) -> tuple[Step, ...]:
        """The steps to issue, in order: forks of every side stream, then for each operator in ``order`` the
        waits of its incoming syncs, its launch and the records of its outgoing syncs, then every join."""
        stream = self.stream_of()
        before: defaultdict[Hashable, list[Step]] = defaultdict(list)
        after: defaultdict[Hashable, list[Step]] = defaultdict(list)
        for i, sync in enumerate(self.syncs):
            after[sync.src].append(Record(i, sync.src_stream))
            before[sync.dst].append(Wait(i, sync.dst_stream))
        side = range(CAPTURE_STREAM + 1, len(self.streams))
        steps: list[Step] = [Fork(s) for s in side]
        for node in self.order:
            steps += [*before[node], Launch(node, stream[node]), *after[node]]
        steps += [Join(s) for s in side]
        return tuple(steps)

    def describe(self) -> str:
        """A human-readable summary: the streams with their operators, the syncs, fork and join."""
        lines = [
            f"operators: {len(self.order)}, streams: {len(self.streams)}"
            f"{' (chains merged)' if self.merged else ''}, "
            f"syncs: {len(self.syncs)} (transitive reduction: {self.reduced_edges} edges), "
            f"maximum concurrency (DAG width): {self.width}",
        ]
        for s, nodes in enumerate(self.streams):
            role = "capture" if s == CAPTURE_STREAM else "side"
            lines.append(f"  stream {s}, {role}: {' -> '.join(map(str, nodes))}")
        if len(self.streams) > 1:
            lines.append("  every side stream forks from stream 0 before the first operator "
                         "and joins it after the last")
        if self.syncs:
            lines.append("  syncs (record after -> wait before):")
            lines += [f"    {sync.src} [{sync.src_stream}] -> {sync.dst} [{sync.dst_stream}]"
                      for sync in self.syncs]
        return "\n".join(lines)


# How the plan is made, and why it is optimal.
#
# 1. R, the transitive reduction of G (for a DAG, its unique minimum equivalent graph);
# 2. a bipartite graph with an out-copy and an in-copy of every node and an edge (u_out, v_in) for every edge
#    u -> v of R;
# 3. a maximum matching of it (Hopcroft-Karp); every matched edge puts v right after u on u's stream, so the
#    streams are vertex-disjoint paths of R;
# 4. one synchronisation (event record after u, wait before v) for every edge u -> v of R whose ends are on
#    different streams. Edges of G outside R need none: a path of R orders them.
#
# Two nodes share a stream only if one reaches the other, so the plan serialises nothing that could run
# concurrently. On a stream holding nodes in reachability order, only consecutive nodes can be joined by an
# edge of R, so the edges of R inside streams form a matching of step 2's graph and no plan needs fewer
# synchronisations than |R| - |maximum matching|, which is what this one has.
#
# Merging: chain A wholly precedes chain B when the last node of A reaches the first node of B in G; then
# A + B is again totally ordered by reachability, and one stream for it loses no concurrency. Wholly-precedes
# is a strict partial order on chains, so a maximum matching of the bipartite graph (A_out, B_in) over such
# pairs gives the fewest streams made of whole chains. Merging keeps the number of synchronisations: R has no
# edge from the last node of A to the first of B (it would have enlarged the first matching), and any other
# edge between them is implied by a longer path. Two chains of step 3 that are totally ordered together always
# wholly precede one another, so no pair is missed. The merged count is at least the width of G (Dilworth)
# and can exceed it, since whole chains are kept.
#
# Cost: nodes are numbered in issue order and the descendants of each kept as one bitset (a Python int),
# built from the last node back. An edge u -> v of G stays in R unless a successor of u that comes before v
# reaches it, and the width's matching over the closure works on the bitsets (_width): O(m n / 64) word
# operations for n nodes and m edges. Hopcroft-Karp runs only over R and, when merging, over pairs of chains.


def plan_streams(dag: nx.DiGraph, *, merge: bool = False) -> StreamPlan:
    """Nimble's stream plan for ``dag`` (nodes: operators; edges: data dependencies).

    The issue order is the topological order that keeps ``dag``'s node insertion order where it can, so a
    graph built in program order is issued in program order. Deterministic for a given ``dag``. Raises
    ``InputError`` if ``dag`` has a cycle.
    """
    order = _issue_order(dag)
    successors = _successors(dag, order)
    reach = _reach(successors)
    edges = _reduction(successors, reach)  # in issue order of (source, destination)
    streams = _paths(range(len(order)), _max_matching(len(order), edges))  # in order of their first node
    if merge:
        streams = _merge_chains(streams, reach)
    stream = [0] * len(order)
    for s, chain in enumerate(streams):
        for i in chain:
            stream[i] = s
    syncs = [Sync(order[i], order[j], stream[i], stream[j])
             for j, i in sorted((j, i) for i, j in edges if stream[i] != stream[j])]
    return StreamPlan(order=tuple(order), streams=tuple(tuple(order[i] for i in chain) for chain in streams) or ((),),
                      syncs=tuple(syncs), reduced_edges=len(edges), width=_width(reach), merged=merge)


def dag_width(dag: nx.DiGraph) -> int:
    """The size of the largest set of pairwise unreachable nodes: the most operators that can run at once.

    By Dilworth and Fulkerson, the node count minus a maximum matching of the transitive closure's bipartite
    graph. Raises ``InputError`` if ``dag`` has a cycle.
    """
    order = _issue_order(dag)
    return _width(_reach(_successors(dag, order)))


def _issue_order(dag: nx.DiGraph) -> list[Hashable]:
    """The topological order of ``dag`` that issues, of the nodes whose predecessors are all issued, the one
    inserted first (Kahn's algorithm with a heap of insertion positions); ``InputError`` on a cycle."""
    nodes = list(dag.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    waiting = [dag.in_degree(node) for node in nodes]
    ready = [i for i, count in enumerate(waiting) if count == 0]
    order = []
    while ready:
        node = nodes[heapq.heappop(ready)]
        order.append(node)
        for successor in dag.successors(node):
            i = position[successor]
            waiting[i] -= 1
            if waiting[i] == 0:
                heapq.heappush(ready, i)
    if len(order) < len(nodes):
        raise InputError("the operator graph has a cycle, so it cannot be scheduled onto streams")
    return order


def _successors(dag: nx.DiGraph, order: list[Hashable]) -> list[list[int]]:
    """Each node's successors, nodes numbered by their position in ``order``, in increasing order."""
    index = {node: i for i, node in enumerate(order)}
    return [sorted(index[v] for v in dag.successors(u)) for u in order]


def _reach(successors: list[list[int]]) -> list[int]:
    """Each node's descendants as a bitset (bit ``j`` of ``reach[i]``: ``i`` reaches ``j``), the nodes numbered
    in a topological order, built from the last node back: O(edges x nodes / word size) word operations."""
    reach = [0] * len(successors)
    for i in range(len(successors) - 1, -1, -1):
        descendants = 0
        for j in successors[i]:
            descendants |= reach[j] | 1 << j
        reach[i] = descendants
    return reach


def _reduction(successors: list[list[int]], reach: list[int]) -> list[tuple[int, int]]:
    """The edges ``(i, j)`` of the transitive reduction, by increasing ``i`` then ``j``.

    ``i -> j`` is implied exactly when another successor of ``i`` reaches ``j``; such a successor comes before
    ``j`` in the topological order, so walking ``i``'s successors in that order, ``j`` is kept unless a kept
    one reaches it (a dropped one reaches nothing that the one reaching it does not).
    """
    edges = []
    for i, nexts in enumerate(successors):
        covered = 0
        for j in nexts:
            if not covered >> j & 1:
                edges.append((i, j))
                covered |= reach[j]
    return edges


def _width(reach: list[int]) -> int:
    """The DAG's width from its reachability bitsets: the node count minus a maximum matching of the closure's
    bipartite graph (``i_out`` to ``j_in`` wherever ``i`` reaches ``j``).

    The closure can have nodes^2 / 2 edges, so they stay bitsets. A greedy matching pairs each node, from the
    last in the topological order back, with its first unpaired descendant; then each node left unpaired
    searches an augmenting path breadth-first (Kuhn's algorithm, which makes the matching maximum from any
    start). Descendants visited by a search that found none cannot lead to one until the matching changes, so
    they stay visited until the next augmentation. On layered networks the greedy matching is already
    maximum or nearly, and the remaining searches together visit each node about once.
    """
    n = len(reach)
    right_of, left_of = [-1] * n, [-1] * n
    unpaired = (1 << n) - 1  # the in-copies not yet matched
    for i in range(n - 1, -1, -1):
        if free := reach[i] & unpaired:
            j = (free & -free).bit_length() - 1
            right_of[i], left_of[j] = j, i
            unpaired ^= 1 << j
    seen = 0
    for root in range(n):
        if right_of[root] >= 0 or not reach[root] & ~seen:
            continue
        via, frontier, end = {}, [root], -1
        while frontier and end < 0:
            following = []
            for i in frontier:
                new = reach[i] & ~seen
                seen |= new
                if free := new & unpaired:
                    end = (free & -free).bit_length() - 1
                    via[end] = i
                    break
                while new:
                    low = new & -new
                    new ^= low
                    j = low.bit_length() - 1
                    via[j] = i
                    following.append(left_of[j])
            frontier = following
        if end < 0:
            continue
        unpaired ^= 1 << end
        j = end
        while j >= 0:  # flip the path: each node on it takes the in-copy it was reached through
            i = via[j]
            right_of[i], left_of[j], j = j, i, right_of[i]
        seen = 0
    return n - sum(j >= 0 for j in right_of)


def _max_matching(count: int, edges: Iterable[tuple[int, int]]) -> dict[int, int]:
    """A maximum matching of the bipartite graph (u_out, v_in) over ``edges`` between nodes ``0..count - 1``,
    as ``{u: v}``: networkx's Hopcroft-Karp, whose result depends only on the nodes and the edge order here,
    and on integers, which unlike strings hash the same in every process."""
    bipartite = nx.Graph()
    tops = [(0, i) for i in range(count)]
    bipartite.add_nodes_from(tops)
    bipartite.add_edges_from(((0, u), (1, v)) for u, v in edges)
    matching = hopcroft_karp_matching(bipartite, top_nodes=tops)
    return {u: v for (side, u), (_, v) in matching.items() if side == 0}


def _merge_chains(chains: list[tuple[int, ...]], reach: list[int]) -> list[tuple[int, ...]]:
    """Fewest concatenations of whole chains, each chain wholly preceding the next (see the comment on plan_streams)."""
    precedes = [(i, j) for i, chain in enumerate(chains) for j, other in enumerate(chains)
                if reach[chain[-1]] >> other[0] & 1]
    groups = _paths(range(len(chains)), _max_matching(len(chains), precedes))
    return [tuple(node for i in group for node in chains[i]) for group in groups]


def _paths(order: Iterable[Hashable], successor: dict) -> list[tuple]:
    """The paths that ``successor`` links, one from each node of ``order`` that is nobody's successor."""
    linked = set(successor.values())
    paths = []
    for node in order:
        if node in linked:
            continue
        path = [node]
        while path[-1] in successor:
            path.append(successor[path[-1]])
        paths.append(tuple(path))
    return paths
