"""Nimble's stream assignment: the operators of a DAG onto GPU streams with the fewest synchronisations.

Kwon, Yu, Jeong, Chun: "Nimble: Lightweight and Parallel GPU Task Scheduling for Deep Learning", NeurIPS 2020,
section 3.2. Pure Python over networkx: no torch, no GPU.

The algorithm, for a DAG ``G`` whose nodes are operators and whose edges are data dependencies:

1. ``R``, the transitive reduction of ``G`` (for a DAG, its unique minimum equivalent graph);
2. a bipartite graph with an out-copy and an in-copy of every node and an edge ``(u_out, v_in)`` for
   every edge ``u -> v`` of ``R``;
3. a maximum matching of it (Hopcroft-Karp); every matched edge puts ``v`` right after ``u`` on ``u``'s
   stream, so the streams are vertex-disjoint paths of ``R``;
4. one synchronisation (event record after ``u``, wait before ``v``) for every edge ``u -> v`` of ``R``
   whose ends are on different streams. Edges of ``G`` outside ``R`` need none: a path of ``R`` orders them.

Two nodes share a stream only if one reaches the other, so the plan serialises nothing that could run
concurrently: with any operator durations, every operator can start as soon as its last predecessor ends.
On a stream holding nodes in reachability order, only consecutive nodes can be joined by an edge of ``R``,
so the edges of ``R`` inside streams form a matching of step 2's graph and no plan needs fewer
synchronisations than ``|R| - |maximum matching|``, which is what this one has.

Merging (``merge=True``, the authors' second matching). Chain ``A`` *wholly precedes* chain ``B`` when the
last node of ``A`` reaches the first node of ``B`` in ``G``; then every node of ``A`` reaches every node of
``B``, the concatenation ``A + B`` is again totally ordered by reachability, and putting it on one stream
loses no concurrency. Wholly-precedes is a strict partial order on chains, so a maximum matching of the
bipartite graph ``(A_out, B_in)`` over such pairs gives the fewest streams made of whole chains this way.
Merging keeps the number of synchronisations: ``R`` has no edge from the last node of ``A`` to the first
node of ``B`` (it would have enlarged the first matching), and any other edge between them is implied by a
longer path. Two chains of step 3 that are totally ordered together always wholly precede one another (a
node of one strictly between consecutive nodes of the other would make their edge transitive), so this rule
misses no pair. The merged count is at least the width of ``G`` (its largest set of pairwise unordered
nodes, Dilworth) and can exceed it, since whole chains are kept: a cover by ``width`` chains may cut them.

Stream 0 is the capture stream (the caller's current stream); every other stream forks from it before the
first operator and joins it after the last, which is what CUDA graph capture over several streams requires.

>>> dag = nx.DiGraph([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
>>> plan = plan_streams(dag)
>>> plan.streams, len(plan.syncs), plan.width
((('a', 'b', 'd'), ('c',)), 2, 2)
"""

from __future__ import annotations

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


def plan_streams(dag: nx.DiGraph, *, merge: bool = False) -> StreamPlan:
    """Nimble's stream plan for ``dag`` (nodes: operators; edges: data dependencies).

    The issue order is the topological order that keeps ``dag``'s node insertion order where it can, so a
    graph built in program order is issued in program order. Deterministic for a given ``dag``. Raises
    ``InputError`` if ``dag`` has a cycle.
    """
    if not nx.is_directed_acyclic_graph(dag):
        raise InputError("the operator graph has a cycle, so it cannot be scheduled onto streams")
    position = {node: i for i, node in enumerate(dag.nodes)}
    order = tuple(nx.lexicographical_topological_sort(dag, key=position.__getitem__))
    position = {node: i for i, node in enumerate(order)}
    reduced = nx.transitive_reduction(dag)  # its edge order depends on string hashing: sort it
    edges = sorted(reduced.edges, key=lambda edge: (position[edge[0]], position[edge[1]]))
    streams = _paths(order, _max_matching(order, edges))  # in order of their first node
    if merge:
        streams = _merge_chains(dag, streams)
    stream = {node: s for s, nodes in enumerate(streams) for node in nodes}
    syncs = sorted((Sync(u, v, stream[u], stream[v]) for u, v in edges if stream[u] != stream[v]),
                   key=lambda sync: (position[sync.dst], position[sync.src]))
    return StreamPlan(order=order, streams=tuple(streams) or ((),), syncs=tuple(syncs),
                      reduced_edges=len(edges), width=dag_width(dag), merged=merge)


def dag_width(dag: nx.DiGraph) -> int:
    """The size of the largest set of pairwise unreachable nodes: the most operators that can run at once.

    By Dilworth and Fulkerson, the node count minus a maximum matching of the transitive closure's bipartite
    graph.
    """
    closure_edges = [(u, v) for u in dag.nodes for v in nx.descendants(dag, u)]
    return dag.number_of_nodes() - len(_max_matching(dag.nodes, closure_edges))


def _max_matching(nodes: Iterable[Hashable], edges: Iterable[tuple[Hashable, Hashable]]) -> dict:
    """A maximum matching of the bipartite graph (u_out, v_in) over ``edges``, as ``{u: v}``.

    The bipartite graph is built over the nodes' positions in ``nodes``: networkx iterates sets of them, and
    integers, unlike strings, hash the same in every process, so the matching does not depend on the run.
    """
    nodes = list(nodes)
    index = {node: i for i, node in enumerate(nodes)}
    bipartite = nx.Graph()
    tops = [(0, i) for i in range(len(nodes))]
    bipartite.add_nodes_from(tops)
    bipartite.add_edges_from(((0, index[u]), (1, index[v])) for u, v in edges)
    matching = hopcroft_karp_matching(bipartite, top_nodes=tops)
    return {nodes[u]: nodes[v] for (side, u), (_, v) in matching.items() if side == 0}


def _merge_chains(dag: nx.DiGraph, chains: list[tuple]) -> list[tuple]:
    """Fewest concatenations of whole chains, each chain wholly preceding the next (see the module doc)."""
    precedes = []
    for i, chain in enumerate(chains):
        after = nx.descendants(dag, chain[-1])
        precedes += [(i, j) for j, other in enumerate(chains) if other[0] in after]
    groups = _paths(range(len(chains)), _max_matching(range(len(chains)), precedes))
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
