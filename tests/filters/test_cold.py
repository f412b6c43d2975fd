"""Trimmer's cold-candidate filter on synthetic records: which measurements are cold, and which proposals
are skipped."""

import json
import math

import numpy as np
import pytest

from tunewise import filters
from tunewise.filters import ColdFilter, Measured, cold_flags, trace_tokens


def record(tile: int, unroll: int) -> str:
    """A tuning record whose trace samples one tile size and one unroll factor."""
    instructions = [["GetSBlock", [], ["conv", "main"], ["b0"]], ["SamplePerfectTile", ["l0"], [2, 64], ["v0", "v1"]],
                    ["SampleCategorical", [], [[0, 16, 64], [0.3, 0.3, 0.4]], ["v2"]], ["EnterPostproc", [], [], []]]
    return json.dumps([[instructions, [[1, [64 // tile, tile]], [2, unroll]]], None, None, None])


def test_trace_tokens_name_the_sketch_and_every_decision():
    tokens = trace_tokens(record(8, 2))
    assert tokens[0].startswith("sketch=") and tokens[1:] == ["1:SamplePerfectTile:0=8", "1:SamplePerfectTile:1=8",
                                                              "2:SampleCategorical:0=2"]
    assert trace_tokens(record(4, 2))[0] == tokens[0]  # same sketch, other decisions


def test_cold_means_far_above_the_recent_trend_or_failed():
    latencies = [1.0, 1.1, 0.9, 3.0, 1.0, math.inf, 0.5, 1.9]
    assert cold_flags(latencies, window=4, ratio=2.0) == [False, False, False, True, False, True, False, False]
    assert cold_flags([5.0, 5.0]) == [False, False]  # too little before them to call anything cold


def workload_history(rng, n=80):
    """Candidates of one workload: tile 1 is always cold (20x slower), other tiles fast, in random order."""
    measured = []
    for _ in range(n):
        tile, unroll = int(rng.choice([1, 2, 4, 8, 16])), int(rng.integers(0, 3))
        latency = (20.0 if tile == 1 else 1.0 + 0.1 * rng.random()) * 1e-3
        measured.append(Measured(7, record(tile, unroll), latency))
    return measured


def test_a_candidate_whose_neighbours_were_all_cold_is_skipped_and_another_is_not():
    cold = ColdFilter(k=3, epsilon=1.0, decay=1.0, seed=0)
    measured = workload_history(np.random.default_rng(0))
    assert not any(cold.skip(7, [record(1, 0)]))  # nothing learnt yet
    cold.tell(measured[:10])
    assert cold.skip(7, [record(1, 0)]) == [False]  # fewer than min_samples: no net yet
    cold.tell(measured[10:])
    assert cold.skip(7, [record(1, 0), record(8, 0), record(1, 2), record(4, 1)]) == [True, False, True, False]
    assert cold.skip(8, [record(1, 0)]) == [False]  # another workload: no neighbours of its own


def test_the_filter_applies_less_often_after_each_retraining():
    cold = ColdFilter(k=3, epsilon=1.0, decay=0.5, min_epsilon=0.1, seed=0)
    measured = workload_history(np.random.default_rng(1), n=96)
    for start in range(0, 96, 16):
        cold.tell(measured[start:start + 16])
    assert cold.epsilon == pytest.approx(0.1)  # retrained after batches 2-6: 0.5, 0.25, 0.125, then the floor
    skipped = sum(cold.skip(7, [record(1, 0)])[0] for _ in range(400))
    assert 20 < skipped < 65  # about 0.1 * 400 = 40


def test_bad_arguments_and_names():
    with pytest.raises(ValueError, match="k must be a positive integer"):
        ColdFilter(k=0)
    with pytest.raises(ValueError, match="epsilon"):
        ColdFilter(epsilon=1.5)
    assert isinstance(filters.create("cold", k=2), ColdFilter) and filters.names() == ["cold"]


class EveryOther(filters.CandidateFilter):
    """Skips every other proposal it is shown; keeps what it was told."""

    def __init__(self):
        self.told, self.shown = [], 0

    def tell(self, measured):
        self.told += list(measured)

    def skip(self, workload, records):
        flags = [(self.shown + i) % 2 == 1 for i in range(len(records))]
        self.shown += len(records)
        return flags


@pytest.mark.tvm
def test_a_session_measures_only_what_the_filter_keeps_and_stores_the_count(tiny_mlp, measurer):
    from tunewise import schedulers, stores
    from tunewise.tuning import session

    store = stores.create("sqlite://")
    run_id = store.create_run(tiny_mlp.name, str(tiny_mlp.target), "round-robin", {})
    every_other = EveryOther()
    run = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=8), measurer, store,
                          run_id, session.SessionParts(trials_per_slot=4, share="off", candidate_filter=every_other))
    assert run.run().trials == 8
    checkpoints = store.get_checkpoints(run_id)
    # each slot asks three times at most to replace what the filter skipped (half of what it is shown)
    assert sum(c.trials for c in checkpoints) == 8 and all(0 < c.trials <= 4 for c in checkpoints)
    assert checkpoints[0].skipped == 3  # shown 4, 2 skipped; shown 2 more, 1 skipped; shown 1 more, kept
    assert run.skipped == sum(c.skipped for c in checkpoints) == every_other.shown - 8
    assert [m.record for m in every_other.told] == [t.record for t in store.get_trials(run_id)]
    # resumed: the filter is told what the store holds
    again = EveryOther()
    session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=8), measurer, store,
                    run_id, session.SessionParts(trials_per_slot=4, candidate_filter=again))
    assert [m.latency for m in again.told] == [t.latency for t in store.get_trials(run_id)]
