"""Task schedulers: a conformance suite run on every scheduler, then each one's own behaviour."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunewise import schedulers
from tunewise.errors import InputError
from tunewise.schedulers import Flops, Gradient, Random, RoundRobin, Sequential, TaskScheduler
from tunewise.tuning.state import Snapshot, TaskView

# Small MCMC settings keep the DynaTune schedulers fast enough for the conformance suite.
FAST = {"n_walkers": 8, "n_steps": 60, "burn_in": 30, "thin": 5}
SEEDED = {"random", "gradient", "gated-gradient", "dynatune", "dynatune-egreedy", "dynatune-softmax"}


def build(name: str, seed: int = 0) -> TaskScheduler:
    kwargs = {"seed": seed} if name in SEEDED else {}
    if name.startswith("dynatune"):
        kwargs.update(FAST)
    return schedulers.create(name, **kwargs)


def curve(k: int, n: int) -> tuple[float, ...]:
    """A best-latency history for task ``k``: 1 ms falling towards 0.2 ms, a different pace per task."""
    return tuple(1e-3 * (0.2 + 0.8 / (1.0 + 0.3 * (k + 1) * i)) for i in range(1, n + 1))


def view(k: int, slots: int = 0, finished: bool = False, weight: int = 1, flops: float = 1e6) -> TaskView:
    trials = tuple(16 * (i + 1) for i in range(slots))
    return TaskView(k, f"t{k}", weight, flops, 1e-3, curve(k, slots), trials, 16 * slots, finished=finished)


def snapshot(tasks) -> Snapshot:
    tasks = tuple(tasks)
    return Snapshot(tasks, slot=sum(t.slots for t in tasks), trials=sum(t.trials for t in tasks))


def advance(snap: Snapshot, k: int, *, per_task_slots: int | None = None) -> Snapshot:
    """What the session does after task ``k``'s slot: one more curve point and 16 more trials."""
    tasks = list(snap.tasks)
    t = tasks[k]
    slots = t.slots + 1
    finished = per_task_slots is not None and slots >= per_task_slots
    tasks[k] = view(k, slots, finished, t.weight, t.flops)
    return snapshot(tasks)


def run(scheduler: TaskScheduler, snap: Snapshot, slots: int, **kw) -> list[int]:
    picks = []
    for _ in range(slots):
        k = scheduler.next(snap)
        if k is None:
            break
        picks.append(k)
        snap = advance(snap, k, **kw)
    return picks


# ---- conformance: every registered scheduler ----------------------------------------------------------

ALL = schedulers.names()


@st.composite
def snapshots(draw):
    n = draw(st.integers(1, 6))
    tasks = [view(k, draw(st.integers(0, 6)), draw(st.booleans()), draw(st.integers(1, 4))) for k in range(n)]
    return snapshot(tasks)


@pytest.mark.parametrize("name", ALL)
def test_is_a_task_scheduler(name):
    assert isinstance(build(name), TaskScheduler)


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=15, deadline=None)
@given(snap=snapshots())
def test_picks_only_live_tasks_and_leaves_snapshot_unchanged(name, snap):
    before = copy.deepcopy(snap)
    k = build(name).next(snap)
    assert snap == before
    if snap.live:
        assert k in {t.index for t in snap.live}
    else:
        assert k is None


@pytest.mark.parametrize("name", ALL)
def test_none_when_all_finished(name):
    assert build(name).next(snapshot(view(k, 3, finished=True) for k in range(3))) is None
    assert build(name).next(snapshot(())) is None


@pytest.mark.parametrize("name", ALL)
def test_deterministic_for_a_fixed_seed(name):
    start = snapshot(view(k) for k in range(4))
    assert run(build(name, seed=7), start, 20) == run(build(name, seed=7), start, 20)


@pytest.mark.parametrize("name", ALL)
def test_stops_when_budgets_are_spent(name):
    picks = run(build(name), snapshot(view(k) for k in range(3)), 50, per_task_slots=4)
    assert sorted(picks) == [0] * 4 + [1] * 4 + [2] * 4


# ---- each scheduler's behaviour -----------------------------------------------------------------------


def test_sequential_keeps_the_first_live_task():
    picks = run(Sequential(), snapshot(view(k) for k in range(3)), 9, per_task_slots=3)
    assert picks == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert Sequential().next(snapshot([view(0, 2, True), view(1, 5), view(2)])) == 1


def test_round_robin_cycles_and_skips_finished():
    assert run(RoundRobin(), snapshot(view(k) for k in range(3)), 7) == [0, 1, 2, 0, 1, 2, 0]
    snap = snapshot([view(0, 1), view(1, 1, finished=True), view(2, 1)])
    assert run(RoundRobin(), snap, 4) == [0, 2, 0, 2]


def test_round_robin_evens_out_uneven_counts_first():
    assert run(RoundRobin(), snapshot([view(0, 3), view(1, 1), view(2, 0)]), 7) == [2, 1, 2, 1, 2, 0, 1]


def test_random_is_roughly_uniform_over_live_tasks():
    snap = snapshot([view(0), view(1, finished=True), view(2), view(3), view(4)])
    scheduler = Random(seed=3)
    counts = np.bincount([scheduler.next(snap) for _ in range(4000)], minlength=5)
    assert counts[1] == 0
    # Each live task expects 1000 picks, binomial std ~27: a 10 % band is > 3.5 std.
    assert np.all(np.abs(counts[[0, 2, 3, 4]] - 1000) < 100), counts


def test_random_seeds_differ():
    snap = snapshot(view(k) for k in range(5))
    assert run(Random(seed=1), snap, 30) != run(Random(seed=2), snap, 30)


def test_flops_gives_trials_in_proportion_to_flops_times_weight():
    tasks = [view(0, flops=1e6), view(1, flops=2e6), view(2, flops=1e6, weight=3), view(3, flops=4e6)]
    picks = run(Flops(), snapshot(tasks), 1000)
    share = np.bincount(picks, minlength=4) / len(picks)
    assert np.allclose(share, np.array([1, 2, 3, 4]) / 10, atol=0.005), share


def test_flops_uses_trials_not_slots():
    few_trials = TaskView(0, "t0", 1, 1e6, 1e-3, (1e-3,) * 3, (4, 8, 10), trials=10)
    many_trials = TaskView(1, "t1", 1, 1e6, 1e-3, (1e-3,), (40,), trials=40)
    assert Flops().next(snapshot([few_trials, many_trials])) == 0


def hand_score(best, weight, alpha=0.2, w=3):
    n = len(best)
    g1 = (best[n - 1 - w] - best[n - 1]) / w if n >= w + 1 else 0.0
    return (alpha * g1 + (1 - alpha) * best[-1] / n) * weight


def test_gradient_score_matches_a_hand_computation():
    best = (9.0, 6.0, 5.0, 4.5, 4.0)
    task = TaskView(0, "a", 2, 1e6, 10.0, best)
    # g1 = (6 - 4) / 3, g2 = 4 / 5: score = (0.2 * 2/3 + 0.8 * 0.8) * 2
    assert Gradient().score(task) == pytest.approx((0.2 * 2 / 3 + 0.8 * 0.8) * 2)
    assert Gradient().score(task) == pytest.approx(hand_score(best, 2))
    assert Gradient(alpha=0.5, window=1).score(task) == pytest.approx(hand_score(best, 2, 0.5, 1))
    # No window gradient before window + 1 slots.
    assert Gradient().score(TaskView(0, "a", 1, 1e6, 10.0, (9.0, 6.0, 5.0))) == pytest.approx(0.8 * 5.0 / 3)


def test_gradient_round_robin_pass_then_highest_score():
    a = TaskView(0, "a", 1, 1e6, 1.0, (0.5, 0.4))
    b = TaskView(1, "b", 2, 1e6, 1.0, (0.3,))
    c = TaskView(2, "c", 1, 1e6, 1.0)
    assert Gradient().next(snapshot([a, b, c])) == 2
    assert Gradient().next(snapshot([a, b])) == 1


@pytest.mark.parametrize(
    ("favoured", "other"),
    [  # pairs alike in all but one respect, where the scheduler must favour the first
        ((3, (4.0, 3.0, 2.0, 1.0)), (1, (4.0, 3.0, 2.0, 1.0))),  # three times the weight
        ((1, (4.0, 3.0, 2.0, 1.0)), (1, (1.0, 1.0, 1.0, 1.0))),  # still improving, same latency now
        ((1, (40.0, 30.0, 20.0, 10.0)), (1, (4.0, 3.0, 2.0, 1.0))),  # the same curve ten times slower
    ],
)
def test_gradient_favours_the_heavier_the_improving_and_the_slower_task(favoured, other):
    for first, second in ((favoured, other), (other, favoured)):
        pair = [TaskView(k, str(k), weight, 1e6, 100.0, best) for k, (weight, best) in enumerate((first, second))]
        assert Gradient(seed=0).next(snapshot(pair)) == (0 if first is favoured else 1)


def test_gradient_counts_an_unmeasured_task_at_its_default_latency():
    failing = TaskView(0, "failing", 1, 1e6, 2e-3, (math.inf, math.inf))
    tuned = TaskView(1, "tuned", 1, 1e6, 2e-3, (1e-3,))
    assert Gradient().score(failing) == pytest.approx(0.8 * 2e-3 / 2)
    # TVM's 1e100 ms would make the failing task win every slot; at its default latency it competes.
    heavy = TaskView(1, "tuned", 3, 1e6, 2e-3, (1e-3,))
    assert Gradient().next(snapshot([failing, heavy])) == 1  # 0.8e-3 < 0.8 * 1e-3 * 3
    heavy_failing = TaskView(0, "failing", 2, 1e6, 2e-3, (math.inf, math.inf))
    assert Gradient().next(snapshot([heavy_failing, tuned])) == 0  # 1.6e-3 > 0.8e-3
    # Progress after the first valid result is measured from the default latency.
    late = TaskView(0, "late", 1, 1e6, 2e-3, (math.inf, math.inf, math.inf, 1e-3))
    assert Gradient().score(late) == pytest.approx(0.2 * (2e-3 - 1e-3) / 3 + 0.8 * 1e-3 / 4)


def test_gradient_ties_are_broken_by_its_own_generator():
    snap = snapshot(TaskView(k, str(k), 1, 1e6, 1.0, (0.5,)) for k in range(4))
    picks = [Gradient(seed=s).next(snap) for s in range(40)]
    assert set(picks) == {0, 1, 2, 3}
    assert picks == [Gradient(seed=s).next(snap) for s in range(40)]


# ---- create() -----------------------------------------------------------------------------------------


def test_names_are_all_creatable():
    assert {"sequential", "round-robin", "random", "flops", "gradient"} <= set(schedulers.names())
    for name in schedulers.names():
        assert isinstance(schedulers.create(name), TaskScheduler)


def test_create_passes_arguments_and_returns_instances_unchanged():
    g = schedulers.create("gradient", alpha=0.5, window=2, seed=1)
    assert (g.alpha, g.window, g.seed) == (0.5, 2, 1)
    assert schedulers.create(g) is g


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("nope", {}, "valid names: sequential, round-robin"),
        ("random", {"sed": 1}, "it takes: seed"),
        ("sequential", {"seed": 1}, "takes: no arguments"),
        ("gradient", {"alpha": 2.0}, "alpha must be in [0, 1]"),
        ("gradient", {"window": 0}, "window must be an integer"),
        ("gradient", {"alpha": "x"}, "gradient"),
        ("random", {"seed": "x"}, "random"),
    ],
)
def test_create_rejects_bad_input(name, kwargs, message):
    with pytest.raises(InputError) as err:
        schedulers.create(name, **kwargs)
    assert message in str(err.value)


def test_create_rejects_arguments_with_an_instance():
    with pytest.raises(InputError, match=r"arguments \['seed'\] given with a scheduler instance"):
        schedulers.create(Random(seed=0), seed=1)


# ---- the first pass: heaviest first ---------------------------------------------------------------------

# weight * default latency: 1e-6, 4e-3, 5e-4, inf (its untuned schedule failed), 2e-3; declared in another order
FIRST_PASS = [(1, 1e-6), (2, 2e-3), (1, 5e-4), (1, math.inf), (4, 5e-4)]
HEAVIEST_FIRST = [3, 1, 4, 2, 0]


def first_pass(scheduler: TaskScheduler, per_task_slots: int | None = None) -> list[int]:
    """The first ``len(FIRST_PASS)`` picks from a fresh run, each slot taking its task's latency down 10 %."""
    tasks = [TaskView(k, f"t{k}", w, 1e6, latency) for k, (w, latency) in enumerate(FIRST_PASS)]
    picks = []
    for _ in FIRST_PASS:
        k = scheduler.next(snapshot(tasks))
        picks.append(k)
        t = tasks[k]
        best = 0.9 * min(t.best, t.default_latency if math.isfinite(t.default_latency) else 1e-3)
        tasks[k] = TaskView(k, t.name, t.weight, t.flops, t.default_latency, (*t.best_history, best),
                            (*t.trials_history, t.trials + 16), t.trials + 16,
                            finished=per_task_slots is not None and t.slots + 1 >= per_task_slots)
    return picks


# expected-gain and gated-gradient have no first pass: an untried task competes with the tried ones (their own
# tests)
@pytest.mark.parametrize("name", [n for n in ALL if n not in ("random", "expected-gain", "gated-gradient")])
def test_the_first_pass_goes_heaviest_first(name):
    # sequential tunes one task at a time: with one slot per task its order is its first pass
    per_task = 1 if name == "sequential" else None
    assert first_pass(build(name), per_task) == HEAVIEST_FIRST


def test_heaviest_first_breaks_ties_in_declaration_order():
    from tunewise.schedulers._prior import heaviest_first

    tasks = [TaskView(k, f"t{k}", 1, 1e6, 1e-3) for k in range(3)]
    assert [t.index for t in heaviest_first(reversed(tasks))] == [0, 1, 2]
