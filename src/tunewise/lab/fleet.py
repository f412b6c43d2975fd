"""A fleet of models tuned on N workers, simulated from recorded traces: when every model reaches its goal,
with each population policy (:mod:`tunewise.populations`), and what the shared store and the policy carry.

As tunewise's fleet driver does, every model is its own run, replayed from its trace
(:class:`tunewise.lab.replay.TraceRun`) and occupying one worker. Before every round the policy is shown one
:class:`~tunewise.populations.ModelView` per model and chooses at most ``workers``; the others are suspended.
Each chosen model tunes ``round_seconds`` of its own tuning time, slot after slot (a slot that starts is
finished), and the next round begins when the slowest has finished. A model is finished when its estimate
reaches its goal (its :class:`~tunewise.stoppers.LatencyGoal`) or its recorded trials run out.

Left out: the workers' start-up, moving a suspended run, and the store's own latency, which it reports as a
load instead (:attr:`FleetRun.store_load`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tunewise import populations, schedulers
from tunewise.lab.replay import Trace, TraceRun
from tunewise.populations import ModelView
from tunewise.stoppers import LatencyGoal

COMMIT_SECONDS = 0.2155e-3
"""Store time to commit one trial, in slots of 16, on PostgreSQL
(``bench/studies/pipeline/results/store-overhead.json``)."""
READ_SECONDS = 4.86e-3
"""Store time to read a task's top records, which every search does once a slot (the same file)."""


@dataclass(frozen=True)
class FleetModel:
    """A model of the fleet: seed ``seed_index`` of ``trace``, tuned until its estimate is at most ``goal``
    seconds."""

    trace: Trace
    seed_index: int
    goal: float


@dataclass(frozen=True)
class FleetRun:
    """What a simulated fleet did on ``workers`` workers.

    ``wall`` is the simulated seconds until no model was left to tune; ``reached[i]`` when model ``i``'s
    estimate first reached its goal (``None``: never); ``busy`` the worker-seconds spent tuning (what the
    energy follows); ``policy_seconds`` the policy's own decision time; ``store_load`` the store's busy
    seconds per simulated second (commits and reads at :data:`COMMIT_SECONDS` and :data:`READ_SECONDS`):
    at 1 it would be the bottleneck. ``progress`` holds ``(seconds, the fleet's latency over goal)`` at
    the start and after every round (:meth:`gap_at`).
    """

    workers: int
    wall: float
    reached: tuple[float | None, ...]
    busy: float
    rounds: int
    suspensions: int
    resumptions: int
    trials: int
    slots: int
    policy_seconds: float
    store_load: float
    progress: tuple[tuple[float, float], ...] = ()

    def gap_at(self, seconds: float) -> float:
        """The fleet's latency over goal (the geometric mean of each model's estimate divided by its goal; 1
        or less: every model reached it) at ``seconds`` of the simulation: its value after the last round that
        had ended by then."""
        return [gap for at, gap in self.progress if at <= seconds][-1]

    @property
    def all_reached(self) -> float | None:
        """When the last model reached its goal; ``None`` when one never did."""
        return None if any(r is None for r in self.reached) else max(self.reached, default=0.0)

    @property
    def mean_reached(self) -> float | None:
        """The mean time for a model to reach its goal; ``None`` when one never did."""
        return None if any(r is None for r in self.reached) else sum(self.reached) / len(self.reached)

    @property
    def utilisation(self) -> float:
        """The share of the workers' time spent tuning."""
        return self.busy / (self.workers * self.wall) if self.wall > 0 else 0.0


def simulate(models: Sequence[FleetModel], policy, *, workers: int, round_seconds: float = 60.0,
             scheduler: str = "gradient", trials_per_slot: int = 16) -> FleetRun:
    """Tune ``models`` on ``workers`` workers under ``policy`` (a :class:`~tunewise.populations.PopulationPolicy`
    or its name), each model's tasks chosen by ``scheduler`` (seeded with the model's seed index; decisions
    charged no time, so a simulation is deterministic)."""
    if workers < 1 or not round_seconds > 0:
        raise ValueError(f"workers must be >= 1 and round_seconds > 0, got {workers} and {round_seconds}")
    policy = populations.create(policy)
    runs = [TraceRun(m.trace, schedulers.create_seeded(scheduler, m.seed_index), seed_index=m.seed_index,
                     trials_per_slot=trials_per_slot, decision_cost=0.0, stoppers=[LatencyGoal(latency=m.goal)])
            for m in models]
    history = [[(0.0, run.ledger.history[0][1])] for run in runs]
    reached: list[float | None] = [0.0 if h[0][1] <= m.goal else None for h, m in zip(history, models, strict=True)]
    suspended = [False] * len(models)
    wall = busy = policy_seconds = 0.0

    def gap() -> float:
        ratios = [h[-1][1] / m.goal for h, m in zip(history, models, strict=True)]
        return math.exp(sum(math.log(r) for r in ratios) / len(ratios))

    progress = [(0.0, gap())]
    rounds = suspensions = resumptions = 0
    while not all(run.over for run in runs):
        views = [ModelView(f"{m.trace.model}/{m.seed_index}", tuple(h), run.over, s)
                 for m, h, run, s in zip(models, history, runs, suspended, strict=True)]
        tick = time.perf_counter()
        plan = policy.plan(views, workers)
        policy_seconds += time.perf_counter() - tick
        suspensions, resumptions = suspensions + len(plan.suspend), resumptions + len(plan.resume)
        for i in plan.suspend:
            suspended[i] = True
        longest = 0.0
        for i in plan.run:
            suspended[i] = False
            run, start = runs[i], runs[i].elapsed
            while run.elapsed - start < round_seconds and run.step():
                if reached[i] is None and run.ledger.history[-1][1] <= models[i].goal:
                    reached[i] = wall + run.elapsed - start
            spent = run.elapsed - start
            busy, longest = busy + spent, max(longest, spent)
            history[i].append((run.elapsed, run.ledger.history[-1][1]))
        wall += longest
        rounds += 1
        progress.append((wall, gap()))
    trials = sum(run.ledger.trials for run in runs)
    slots = sum(len(run.picks) for run in runs)
    load = (trials * COMMIT_SECONDS + slots * READ_SECONDS) / wall if wall > 0 else 0.0
    return FleetRun(workers=workers, wall=wall, reached=tuple(reached), busy=busy, rounds=rounds,
                    suspensions=suspensions, resumptions=resumptions, trials=trials, slots=slots,
                    policy_seconds=policy_seconds, store_load=load, progress=tuple(progress))


def fleet_of(traces: Sequence[Trace], size: int, *, within: float = 0.10) -> list[FleetModel]:
    """``size`` models taken in turn from ``traces`` and their seeds (trace 0 seed 0, trace 1 seed 0, ...,
    trace 0 seed 1, ...), each with the goal of coming ``within`` (a fraction) of its seed's best reachable
    latency (:meth:`tunewise.lab.replay.Trace.best_reachable`)."""
    pairs = [(t, s) for s in range(max(t.seeds for t in traces)) for t in traces if s < t.seeds]
    if not pairs:
        raise ValueError("no traces to make a fleet of")
    chosen = [pairs[i % len(pairs)] for i in range(size)]
    return [FleetModel(t, s, (1.0 + within) * t.best_reachable(s)) for t, s in chosen]


def doubling(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``: the worker counts of a scaling table."""
    return [2 ** i for i in range(int(math.log2(limit)) + 1)] if limit >= 1 else []
