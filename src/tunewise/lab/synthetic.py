"""Made-up tuning traces with the shape of recorded ones, for tests and overhead benchmarks."""

from __future__ import annotations

import math

import numpy as np

from tunewise.lab.replay import TaskRun, Trace, TraceTask


def synthetic(*, n_tasks: int, trials: int, seeds: int, seed: int = 0) -> Trace:
    """A made-up trace with the shape of real ones, for tests and overhead benchmarks.

    Task ``k`` has FLOPs ``10^U(7, 9.5)``, a weight in 1..3, an untuned throughput of ``U(1, 5)`` GFLOPS and
    a best-so-far curve that climbs from there to a ``10^U(0.5, 1.3)`` times higher level, half-way at trial
    ``10^U(1, 2.2)``, with a steepness ``U(0.8, 2)``; some tasks jump by half again at a random trial. Each
    trial lands at ``exp(-|N(0, 0.25)|)`` times the curve, fails with a per-task probability up to 15 %,
    and costs ``U(0.2, 1)`` seconds (per task) times ``lognormal(0, 0.3)``. The tasks come from ``seed``,
    the trials of seed index ``s`` from ``(seed, s)``.
    """
    rng = np.random.default_rng(seed)
    x = np.arange(1, trials + 1, dtype=float)
    tasks, curves, fail, cost = [], [], [], []
    for k in range(n_tasks):
        flops = 10 ** rng.uniform(7, 9.5)
        start = rng.uniform(1, 5)
        top = start * 10 ** rng.uniform(0.5, 1.3)
        half, steep = 10 ** rng.uniform(1, 2.2), rng.uniform(0.8, 2.0)
        curve = start + (top - start) / (1 + (half / x) ** steep)
        if rng.random() < 0.3:
            curve = np.where(x >= rng.integers(1, trials + 1), 1.5 * curve, curve)
        tasks.append(TraceTask(f"task{k}", int(rng.integers(1, 4)), float(flops), float(flops / (start * 1e9))))
        curves.append(curve)
        fail.append(rng.uniform(0, 0.15))
        cost.append(rng.uniform(0.2, 1.0))
    runs = []
    for s in range(seeds):
        trial_rng = np.random.default_rng([seed, s])
        runs.append(tuple(
            TaskRun(tuple(float(v) for v in np.where(trial_rng.random(trials) < f, math.inf,
                                                     t.flops / (c * np.exp(-np.abs(trial_rng.normal(0, 0.25, trials)))
                                                                * 1e9))),
                    tuple(float(v) for v in b * trial_rng.lognormal(0, 0.3, trials)))
            for t, c, f, b in zip(tasks, curves, fail, cost, strict=True)))
    return Trace("synthetic", tuple(tasks), tuple(runs), {"synthetic": {"seed": seed, "trials": trials}})
