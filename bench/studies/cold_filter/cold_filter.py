"""Benchmark: how often Trimmer's cold filter would skip, and how often rightly, replayed over stored runs.

::

    .venv/bin/python bench/studies/cold_filter/cold_filter.py sqlite:///tunewise.db --k 5,3 \
        --out bench/results/cold-filter.json

Each run of each store is replayed slot by slot in measurement order (``--k ''``: not replayed): the filter
(:class:`tunewise.filters.ColdFilter`, its defaults but for ``k``, and ``decay`` 1 so that it applies to every
slot rather than ever less often) is asked which of the slot's candidates it would skip, then told what they
measured. A candidate counts as cold by :func:`tunewise.filters.cold_flags` over its task's whole measurement
sequence. Reported per run and ``k``: the trials, the cold share, the candidates the filter would skip, and
how many of those were cold (its precision, against the cold share as the rate of skipping at random).
Per run, also the most any cold filter could save: ``cold_energy_share``, the share of the run's metered
energy (slots and whole-model checks) that building and measuring its cold candidates took, each slot's build
and measure joules split evenly over the candidates it measured.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import stores
from tunewise.filters import ColdFilter, Measured, cold_flags


def cold_trials(trials: list) -> list[bool]:
    """Which of ``trials`` (in measurement order) were cold, over each workload's whole sequence."""
    by_workload: dict[int, list[int]] = {}
    for i, trial in enumerate(trials):
        by_workload.setdefault(trial.workload, []).append(i)
    cold = [False] * len(trials)
    for indices in by_workload.values():
        for i, flag in zip(indices, cold_flags([trials[i].latency for i in indices]), strict=True):
            cold[i] = flag
    return cold


def cold_energy_share(store, run: int, trials: list, cold: list[bool]) -> float | None:
    """The share of run ``run``'s energy spent building and measuring its ``cold`` ``trials`` (``None``: not
    metered)."""
    checkpoints, checks = store.get_checkpoints(run), store.get_model_latencies(run)
    total = sum(c.joules or 0.0 for c in checkpoints) + sum(p.joules or 0.0 for p in checks)
    if total <= 0:
        return None
    measured, cold_in = {}, {}
    for trial, flag in zip(trials, cold, strict=True):
        measured[trial.slot] = measured.get(trial.slot, 0) + 1
        cold_in[trial.slot] = cold_in.get(trial.slot, 0) + flag
    spent = sum((c.phase_joules[1] + c.phase_joules[2]) * cold_in.get(c.slot, 0) / measured[c.slot]
                for c in checkpoints if c.phase_joules and measured.get(c.slot))
    return spent / total


def replay(trials: list, cold: list[bool], k: int) -> dict:
    """What a filter with this ``k`` would have skipped over ``trials`` (stored trials with records, in
    measurement order, ``cold`` by :func:`cold_trials`)."""
    fil = ColdFilter(k=k, decay=1.0, seed=0)
    skipped = rightly = 0
    for _, slot in itertools.groupby(range(len(trials)), key=lambda i: trials[i].slot):
        slot = list(slot)
        for workload, group in itertools.groupby(slot, key=lambda i: trials[i].workload):
            group = list(group)
            for i, skip in zip(group, fil.skip(workload, [trials[i].record for i in group]), strict=True):
                skipped += skip
                rightly += skip and cold[i]
        fil.tell([Measured(trials[i].workload, trials[i].record, trials[i].latency) for i in slot])
    return {"k": k, "skipped": skipped, "skipped_cold": rightly, "precision": rightly / skipped if skipped else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stores", nargs="+", help="store URLs")
    parser.add_argument("--k", default="5,3", help="neighbours that must all be cold")
    parser.add_argument("--out", default="bench/results/cold-filter.json")
    args = parser.parse_args()
    rows = []
    for url in args.stores:
        store = stores.create(url, read_only=True)
        for run in store.get_runs():
            trials = sorted((t for t in store.get_trials(run.id) if t.record), key=lambda t: t.slot)
            if not trials:
                continue
            cold = cold_trials(trials)
            rows.append({"store": stores.display_url(url), "run": run.id, "model": run.model, "target": run.target,
                         "scheduler": run.scheduler, "trials": len(trials), "cold_share": sum(cold) / len(trials),
                         "cold_energy_share": cold_energy_share(store, run.id, trials, cold),
                         "filter": [replay(trials, cold, int(k)) for k in args.k.split(",") if k]})
            print(json.dumps(rows[-1]), flush=True)
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(rows), f, indent=1)


if __name__ == "__main__":
    main()
