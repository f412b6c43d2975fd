"""Benchmark: DynaTune's decision time per slot, and what it decides, on synthetic 20-task traces (no TVM).

    .venv/bin/python bench/studies/schedulers/dynatune_overhead.py                      # the defaults
    .venv/bin/python bench/studies/schedulers/dynatune_overhead.py --n-walkers 10 --n-steps 500 --burn-in 300 \
        --thin 10  # paper

Each trace (:func:`tunewise.lab.synthetic.synthetic`, 20 tasks, 256 trials each, one per ``--traces``) is replayed
with the ``dynatune`` scheduler until every trial is used, 16 trials a slot. Reported: the decision time per
slot, wall clock (``time.perf_counter`` around each decision, as the session measures it) and CPU
(``time.process_time`` over the replay, which includes the replay's own bookkeeping, negligible), as mean,
median, 90th percentile and max; and, from a second replay charging no decision time, the replayed time to
come within 5 % and 1 % of the best reachable latency, which shows whether the decisions changed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tunewise import schedulers
from tunewise.lab import replay as rp
from tunewise.lab.synthetic import synthetic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--n-walkers", type=int)
    parser.add_argument("--n-steps", type=int)
    parser.add_argument("--burn-in", type=int)
    parser.add_argument("--thin", type=int)
    args = parser.parse_args()
    kwargs = {k: v for k, v in vars(args).items() if k not in ("traces", "tasks") and v is not None}

    import scipy.optimize  # noqa: F401  (the belief's one-time import, kept out of the first decision)

    times, cpu, reach = [], [], []
    for t in range(args.traces):
        trace = synthetic(n_tasks=args.tasks, trials=256, seeds=1, seed=100 + t)
        start = time.process_time()
        run = rp.replay(trace, schedulers.create("dynatune", seed=0, **kwargs), seed_index=0)
        cpu.append((time.process_time() - start) / len(run.picks))
        times += run.decision_times
        free = rp.replay(trace, schedulers.create("dynatune", seed=0, **kwargs), seed_index=0, decision_cost=0.0)
        best = trace.best_reachable(0)
        reach.append([rp.time_to_within(free.history, best, g) for g in (0.05, 0.01)])
    ms = 1e3 * np.array(times)
    print(f"dynatune {kwargs or 'defaults'}: {len(ms)} slots over {args.traces} traces")
    print(f"  wall ms/slot: mean {ms.mean():.1f}  median {np.median(ms):.1f}  p90 {np.percentile(ms, 90):.1f}"
          f"  max {ms.max():.0f}")
    print(f"  CPU ms/slot (mean per trace): {statistics.mean(cpu) * 1e3:.1f}  {[round(c * 1e3, 1) for c in cpu]}")
    print("  replayed s to 5 % / 1 % per trace:", [f"{a:.0f}/{b:.0f}" for a, b in reach])


if __name__ == "__main__":
    main()
