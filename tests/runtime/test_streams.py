"""Stream assignment: properties on random DAGs, brute-force optima on small ones, and worked examples."""

import itertools
import os
import random
import subprocess
import sys
import time

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from networkx.algorithms.bipartite import hopcroft_karp_matching

from tunewise import errors
from tunewise.errors import InputError
from tunewise.runtime import streams
from tunewise.runtime.streams import Fork, Join, Launch, Record, StreamPlan, Sync, Wait, dag_width, plan_streams


@st.composite
def dags(draw, max_nodes: int = 10) -> nx.DiGraph:
    """A random DAG on nodes "n0".."n{k-1}" (edges go up in index), inserted in a random order."""
    n = draw(st.integers(0, max_nodes))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    edges = draw(st.sets(st.sampled_from(pairs))) if pairs else set()
    dag = nx.DiGraph()
    dag.add_nodes_from(f"n{i}" for i in draw(st.permutations(range(n))))
    dag.add_edges_from((f"n{i}", f"n{j}") for i, j in edges)
    return dag


def durations_for(dag: nx.DiGraph):
    return st.fixed_dictionaries({node: st.integers(1, 20) for node in dag.nodes})


def reduced_edges(dag: nx.DiGraph) -> set:
    """The transitive reduction by its definition: u -> v stays unless another successor of u reaches v."""
    return {(u, v) for u, v in dag.edges
            if not any(w != v and nx.has_path(dag, w, v) for w in dag.successors(u))}


def reaches(dag: nx.DiGraph, u, v) -> bool:
    return u == v or nx.has_path(dag, u, v)


def simulate(plan: StreamPlan, durations: dict) -> tuple[dict, dict, int]:
    """Start and end time of every operator and the capture stream's end, with each stream running its work
    in issue order, as soon as its waits allow; asserts that no wait comes before its record."""
    ready = [0] * len(plan.streams)
    recorded, start, end = {}, {}, {}
    for step in plan.program():
        match step:
            case Launch(node=node, stream=s):
                start[node], ready[s] = ready[s], ready[s] + durations[node]
                end[node] = ready[s]
            case Record(sync=i, stream=s):
                recorded[i] = ready[s]
            case Wait(sync=i, stream=s):
                assert i in recorded, f"stream {s} waits on sync {i} before it is recorded"
                ready[s] = max(ready[s], recorded[i])
            case Fork(stream=s):
                ready[s] = max(ready[s], ready[0])
            case Join(stream=s):
                ready[0] = max(ready[0], ready[s])
    return start, end, ready[0]


def happens_before(plan: StreamPlan) -> tuple[nx.DiGraph, dict]:
    """The steps of the program ordered by stream order, events, forks and joins; and each launch's step."""
    order, last, record, launch = nx.DiGraph(), {}, {}, {}

    def then(stream: int, k: int, *after: int | None) -> None:
        order.add_node(k)
        order.add_edges_from((a, k) for a in (last.get(stream), *after) if a is not None)
        last[stream] = k

    for k, step in enumerate(plan.program()):
        match step:
            case Launch(node=node, stream=s):
                then(s, k)
                launch[node] = k
            case Record(sync=i, stream=s):
                then(s, k)
                record[i] = k
            case Wait(sync=i, stream=s):
                then(s, k, record[i])
            case Fork(stream=s):
                then(s, k, last.get(0))
            case Join(stream=s):
                then(0, k, last.get(s))
    return order, launch


def check_plan(dag: nx.DiGraph, plan: StreamPlan, durations: dict) -> None:
    """Everything a plan promises, on one DAG and one draw of operator durations."""
    assert sorted(plan.order) == sorted(dag.nodes)
    assert sorted(node for nodes in plan.streams for node in nodes) == sorted(dag.nodes)
    position = {node: i for i, node in enumerate(plan.order)}
    assert all(position[u] < position[v] for u, v in dag.edges)
    for nodes in plan.streams:  # a stream is a chain of the reachability order, in issue order
        assert [position[n] for n in nodes] == sorted(position[n] for n in nodes)
        assert all(reaches(dag, u, v) for u, v in itertools.pairwise(nodes))
    stream = plan.stream_of()
    reduced = reduced_edges(dag)
    assert {(s.src, s.dst) for s in plan.syncs} == {(u, v) for u, v in reduced if stream[u] != stream[v]}
    assert all((s.src_stream, s.dst_stream) == (stream[s.src], stream[s.dst]) for s in plan.syncs)
    assert plan.reduced_edges == len(reduced)

    program = plan.program()
    sides = range(1, len(plan.streams))
    assert program[:len(sides)] == tuple(Fork(s) for s in sides)  # every side stream forks first ...
    assert program[len(program) - len(sides):] == tuple(Join(s) for s in sides)  # ... and joins last
    assert [step.node for step in program if isinstance(step, Launch)] == list(plan.order)

    order, launch = happens_before(plan)
    assert all(nx.has_path(order, launch[u], launch[v]) for u, v in dag.edges)

    start, end, finish = simulate(plan, durations)
    for node in dag.nodes:  # no lost concurrency: every operator starts when its last predecessor ends
        assert start[node] == max((end[p] for p in dag.predecessors(node)), default=0)
    assert finish == max(end.values(), default=0)


@settings(max_examples=60, deadline=None)
@given(st.data(), st.booleans())
def test_plans_are_valid_optimal_in_syncs_and_lose_no_concurrency(data, merge):
    dag = data.draw(dags())
    plan = plan_streams(dag, merge=merge)
    check_plan(dag, plan, data.draw(durations_for(dag)))
    bipartite = nx.Graph(((0, u), (1, v)) for u, v in reduced_edges(dag))
    matching = nx.max_weight_matching(bipartite, maxcardinality=True)  # Edmonds, not Hopcroft-Karp
    assert len(plan.syncs) == plan.reduced_edges - len(matching)


@settings(max_examples=60, deadline=None)
@given(dags())
def test_merging_keeps_syncs_and_never_adds_streams(dag):
    plain, merged = plan_streams(dag), plan_streams(dag, merge=True)
    assert len(merged.syncs) == len(plain.syncs)
    assert plain.width <= len(merged.streams) <= len(plain.streams)
    assert merged.merged and not plain.merged


def partitions(items: list):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in partitions(rest):
        yield [[first], *partition]
        for i in range(len(partition)):
            yield [*partition[:i], [first, *partition[i]], *partition[i + 1:]]


@settings(max_examples=40, deadline=None)
@given(dags(max_nodes=7), st.booleans())
def test_syncs_and_width_match_brute_force_on_small_dags(dag, merge):
    reduced = reduced_edges(dag)
    best = min(
        sum(block[u] != block[v] for u, v in reduced)
        for partition in partitions(list(dag.nodes))
        if all(reaches(dag, u, v) or reaches(dag, v, u) for chain in partition for u in chain for v in chain)
        for block in [{node: i for i, chain in enumerate(partition) for node in chain}]
    )
    plan = plan_streams(dag, merge=merge)
    assert len(plan.syncs) == best
    antichains = [nodes for k in range(len(dag) + 1) for nodes in itertools.combinations(dag.nodes, k)
                  if not any(reaches(dag, u, v) for u, v in itertools.permutations(nodes, 2))]
    assert plan.width == dag_width(dag) == max(map(len, antichains))


def test_review_figure_3_dag():
    # Every path from A to E crosses A -> B, so a max flow says nothing; the matching still finds 2 streams.
    dag = nx.DiGraph([("A", "B"), ("B", "C"), ("B", "D"), ("C", "E"), ("D", "E")])
    plan = plan_streams(dag)
    check_plan(dag, plan, {"A": 1, "B": 1, "C": 5, "D": 2, "E": 1})
    assert plan.streams[0][:3] == ("A", "B", "C") and len(plan.streams) == 2
    assert len(plan.syncs) == 2 and plan.width == 2
    program = plan.program()
    assert program[0] == Fork(1) and program[-1] == Join(1)
    kinds = [type(step).__name__ for step in program]
    assert kinds.count("Record") == kinds.count("Wait") == 2


def test_merge_joins_a_chain_that_wholly_precedes_another():
    dag = nx.DiGraph([("a", "c"), ("b", "c"), ("c", "d"), ("c", "e")])
    plain, merged = plan_streams(dag), plan_streams(dag, merge=True)
    assert len(plain.streams) == 3
    assert len(merged.streams) == 2 == merged.width
    check_plan(dag, merged, dict.fromkeys(dag.nodes, 1))


def test_transitive_edges_need_no_sync():
    dag = nx.DiGraph([("a", "b"), ("b", "c"), ("a", "c"), ("a", "d"), ("d", "c")])
    plan = plan_streams(dag)
    assert plan.reduced_edges == 4 and ("a", "c") not in {(s.src, s.dst) for s in plan.syncs}


def test_empty_and_single_node_graphs():
    assert plan_streams(nx.DiGraph()).streams == ((),)
    assert plan_streams(nx.DiGraph()).program() == ()
    single = nx.DiGraph()
    single.add_node("x")
    assert plan_streams(single).program() == (Launch("x", 0),)


def test_cycle_is_an_input_error():
    with pytest.raises(InputError, match="cycle"):
        plan_streams(nx.DiGraph([("a", "b"), ("b", "a")]))


def test_describe_lists_streams_syncs_fork_and_join():
    plan = plan_streams(nx.DiGraph([("A", "B"), ("B", "C"), ("B", "D"), ("C", "E"), ("D", "E")]))
    text = plan.describe()
    assert "operators: 5, streams: 2, syncs: 2" in text
    assert "maximum concurrency (DAG width): 2" in text
    assert f"stream 0, capture: {' -> '.join(plan.streams[0])}" in text
    assert f"stream 1, side: {' -> '.join(plan.streams[1])}" in text
    for sync in plan.syncs:
        assert f"{sync.src} [{sync.src_stream}] -> {sync.dst} [{sync.dst_stream}]" in text
    assert "forks from stream 0" in text and "joins it" in text


def test_plans_do_not_depend_on_string_hashing():
    # Each process loads streams.py and errors.py alone: the package __init__ files import torch and TVM.
    package = os.path.dirname(errors.__file__)
    script = f"""
import importlib.util, sys, types
import networkx as nx
sys.modules["tunewise"] = types.ModuleType("tunewise")
sys.modules["tunewise"].__path__ = [{package!r}]
spec = importlib.util.spec_from_file_location("streams", {streams.__file__!r})
module = sys.modules["streams"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
g = nx.DiGraph([(f"n{{i}}", f"n{{j}}") for i in range(12) for j in range(i + 1, 12) if (i + 2 * j) % 7 == 1])
plan = module.plan_streams(g, merge=True)
print(plan.streams, plan.syncs)
"""
    outputs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(outputs) == 1 and "Sync(" in outputs.pop()


def hopcroft_karp(count: int, edges: list[tuple[int, int]]) -> dict[int, int]:
    """networkx's Hopcroft-Karp over (i_out, j_in) for ``edges``, nodes and edges inserted as streams.py does."""
    bipartite = nx.Graph()
    tops = [(0, i) for i in range(count)]
    bipartite.add_nodes_from(tops)
    bipartite.add_edges_from(((0, u), (1, v)) for u, v in edges)
    return {u: v for (side, u), (_, v) in hopcroft_karp_matching(bipartite, top_nodes=tops).items() if side == 0}


def linked_paths(count: int, successor: dict[int, int]) -> list[tuple[int, ...]]:
    starts = [i for i in range(count) if i not in set(successor.values())]
    paths = []
    for i in starts:
        path = [i]
        while path[-1] in successor:
            path.append(successor[path[-1]])
        paths.append(tuple(path))
    return paths


def plan_by_definition(dag: nx.DiGraph, merge: bool = False) -> StreamPlan:
    """The plan of the module doc, step by step with networkx's own algorithms: its lexicographic topological
    sort, ``transitive_reduction``, ``descendants`` for the merge and the closure, and Eppstein's matching
    for the width."""
    position = {node: i for i, node in enumerate(dag.nodes)}
    order = tuple(nx.lexicographical_topological_sort(dag, key=position.__getitem__))
    index = {node: i for i, node in enumerate(order)}
    edges = sorted((index[u], index[v]) for u, v in nx.transitive_reduction(dag).edges)
    chains = linked_paths(len(order), hopcroft_karp(len(order), edges))
    if merge:
        precedes = [(a, b) for a, first in enumerate(chains) for b, second in enumerate(chains)
                    if order[second[0]] in nx.descendants(dag, order[first[-1]])]
        groups = linked_paths(len(chains), hopcroft_karp(len(chains), precedes))
        chains = [tuple(i for group_member in group for i in chains[group_member]) for group in groups]
    stream = {i: s for s, chain in enumerate(chains) for i in chain}
    syncs = [Sync(order[i], order[j], stream[i], stream[j])
             for j, i in sorted((j, i) for i, j in edges if stream[i] != stream[j])]
    closure = nx.Graph()
    tops = [("out", node) for node in dag]
    closure.add_nodes_from(tops)
    closure.add_edges_from((("out", u), ("in", v)) for u in dag for v in nx.descendants(dag, u))
    width = len(order) - len(nx.bipartite.eppstein_matching(closure, top_nodes=tops)) // 2
    return StreamPlan(order=order, streams=tuple(tuple(order[i] for i in chain) for chain in chains) or ((),),
                      syncs=tuple(syncs), reduced_edges=len(edges), width=width, merged=merge)


def cell_network(cells: int, seed: int = 0) -> nx.DiGraph:
    """A NASNet-like operator DAG in program order: each cell adjusts the outputs of the two cells before it
    (a chain of 3 operators each), adds pairs of branches (chains of 0, 1 or 8 operators from either adjusted
    input) in five blocks, and concatenates the adjusted earlier input with the blocks; about 42 operators a
    cell."""
    rng = random.Random(seed)
    dag = nx.DiGraph()
    names = (f"op{i}" for i in itertools.count())

    def chain(source: str, length: int) -> str:
        for _ in range(length):
            node = next(names)
            dag.add_edge(source, node)
            source = node
        return source

    prev = cur = chain("input", 3)
    for _ in range(cells):
        p, h = chain(prev, 3), chain(cur, 3)
        blocks = []
        for _ in range(5):
            ends = [chain(rng.choice([p, h]), rng.choice([0, 1, 8])) for _ in range(2)]
            blocks.append(add := next(names))
            dag.add_edges_from((end, add) for end in ends)
        concat = next(names)
        dag.add_edges_from((source, concat) for source in [p, *blocks])
        prev, cur = cur, concat
    return dag


def ladder(levels: int, rungs: int) -> nx.DiGraph:
    """``levels`` levels of ``rungs`` nodes, each node an input of every node of the next level: width
    ``rungs``, and a layered closure with rungs^depth paths between far levels."""
    return nx.DiGraph([((level, a), (level + 1, b)) for level in range(levels - 1)
                       for a in range(rungs) for b in range(rungs)])


@settings(max_examples=80, deadline=None)
@given(dags(max_nodes=12), st.booleans())
def test_plans_equal_the_definition_on_small_dags(dag, merge):
    assert plan_streams(dag, merge=merge) == plan_by_definition(dag, merge)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("merge", [False, True])
def test_plans_equal_the_definition_on_cell_networks(seed, merge):
    dag = cell_network(4, seed)
    plan = plan_streams(dag, merge=merge)
    assert plan == plan_by_definition(dag, merge)
    assert len(plan.streams) >= plan.width > 1


def width_by_definition(dag: nx.DiGraph) -> int:
    return plan_by_definition(dag).width


def test_width_equals_the_definition_on_random_dags():
    # sparse and dense DAGs of up to 14 nodes, where a greedy matching of the closure often falls short
    rng = random.Random(5)
    for _ in range(1000):
        n, density = rng.randint(2, 14), rng.random() / 2
        dag = nx.DiGraph()
        dag.add_nodes_from(range(n))
        dag.add_edges_from((i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < density)
        assert dag_width(dag) == width_by_definition(dag), sorted(dag.edges)


def test_width_of_deep_ladders():
    assert dag_width(ladder(2000, 2)) == 2
    assert dag_width(ladder(300, 5)) == 5
    assert plan_streams(ladder(300, 5)).width == 5


def test_width_of_a_cycle_is_an_input_error():
    with pytest.raises(InputError, match="cycle"):
        dag_width(nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")]))


@pytest.mark.timing
def test_a_1300_operator_network_is_planned_in_well_under_a_second():
    dag = cell_network(31)
    assert 1250 <= dag.number_of_nodes() <= 1400
    plans = {}
    for merge in (False, True):
        start = time.perf_counter()
        plans[merge] = plan_streams(dag, merge=merge)
        plans[merge].program()
        assert time.perf_counter() - start < 1.0  # tens of milliseconds on a 2-core VM
    plain, merged = plans[False], plans[True]
    for plan in (plain, merged):
        assert sorted(node for nodes in plan.streams for node in nodes) == sorted(dag.nodes)
    assert len(plain.syncs) == plain.reduced_edges - (dag.number_of_nodes() - len(plain.streams))
    assert len(merged.syncs) == len(plain.syncs)
    assert plain.width == merged.width <= len(merged.streams) < len(plain.streams)
