"""Benchmark: what the store costs the tuning loop, in milliseconds per committed trial, SQLite and PostgreSQL.

Run by hand, never in CI::

    .venv/bin/python bench/studies/pipeline/store_overhead.py \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/bench \\
        --out bench/results/store-overhead

Each backend gets a new store (SQLite: a file in a temporary folder, WAL, ``synchronous=NORMAL``; PostgreSQL:
the given database, emptied first). Trials carry a tuning-record JSON of the size real ones have (~2 KB).
Measured: committing a slot of 16 trials with its checkpoint in one transaction (what the session does),
committing trials one by one, and ``top_trials(k=102)``, the query the evolutionary search makes before each
batch (its population of 512 times ``init_measured_ratio`` 0.2), once the store holds every trial written.
Writes ``OUT.json`` and ``OUT.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import postgres
import provenance

from tunewise import stores
from tunewise.stores import Checkpoint, StoredTask, StoredTrial


def record(n: int) -> str:
    """A record shaped like MetaSchedule's for a tiled matmul: 28 instructions, ~2 KB of JSON."""
    instructions = [["SamplePerfectTile", [f"l{i}"], [4, 64], [f"v{i}", f"v{i + 1}", f"v{i + 2}", f"v{i + 3}"]]
                    for i in range(14)] + [["Split", [f"l{i}", None, f"v{i}"], [True, False], [f"l{i + 5}"]]
                                           for i in range(14)]
    decisions = [[k, [1, 4, 2, 8]] for k in range(14)]
    return json.dumps([[instructions, decisions], [1e-4 + n * 1e-9], {"kind": "llvm"}, [["TENSOR", "float32",
                                                                                         [64, 64]]] * 3])


def measure(url: str, slots: int, per_slot: int, singles: int) -> dict:
    store = stores.create(url)
    run = store.create_run("bench", "llvm", "round-robin", {})
    workload = store.commit_workload("0123456789abcdef", "{}", lambda other: True)
    store.add_tasks(run, [StoredTask(0, "matmul", workload, 1, 1e6, 1e-3)])
    slot_ms = []
    for slot in range(slots):
        trials = [StoredTrial(workload, record(slot * per_slot + i), (1e-4,), task=0, slot=slot, target="llvm",
                              candidate=f"{slot * per_slot + i:016x}", timestamp=time.time())
                  for i in range(per_slot)]
        start = time.perf_counter()
        store.add_trials(run, trials, Checkpoint(slot, 0, per_slot, float(slot), 1.0, 1e-3))
        slot_ms.append((time.perf_counter() - start) * 1e3)
    single_ms = []
    for i in range(singles):
        trial = StoredTrial(workload, record(i), (1e-4,), task=0, slot=slots + i, target="llvm")
        start = time.perf_counter()
        store.add_trials(run, [trial])
        single_ms.append((time.perf_counter() - start) * 1e3)
    top_ms = []
    for _ in range(20):
        start = time.perf_counter()
        store.top_trials(workload, 102, "llvm")
        top_ms.append((time.perf_counter() - start) * 1e3)
    store.close()
    return {"slot_of_16_ms": statistics.median(slot_ms), "ms_per_trial_in_slots": statistics.median(slot_ms) / per_slot,
            "ms_per_trial_one_by_one": statistics.median(single_ms), "top_102_ms": statistics.median(top_ms),
            "trials_stored": slots * per_slot + singles}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=os.environ.get("TUNEWISE_TEST_POSTGRES_URL"),
                        help="a PostgreSQL database to empty and use (default: $TUNEWISE_TEST_POSTGRES_URL)")
    parser.add_argument("--slots", type=int, default=200)
    parser.add_argument("--singles", type=int, default=300)
    parser.add_argument("--out", default="bench/results/store-overhead")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        results["sqlite"] = measure(f"sqlite:///{folder}/tunewise.db", args.slots, 16, args.singles)
    if args.postgres:
        postgres.empty(args.postgres)
        results["postgresql"] = measure(args.postgres, args.slots, 16, args.singles)
    for backend, r in results.items():
        print(f"{backend:10s} {r['ms_per_trial_in_slots']:.3f} ms/trial in slots of 16 "
              f"({r['slot_of_16_ms']:.2f} ms a slot), {r['ms_per_trial_one_by_one']:.3f} ms/trial one by one, "
              f"top-102 query {r['top_102_ms']:.2f} ms with {r['trials_stored']} trials stored")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(provenance.stamped(results), f, indent=2)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.5), layout="constrained")
    ax = fig.subplots()
    keys = ("ms_per_trial_in_slots", "ms_per_trial_one_by_one", "top_102_ms")
    for i, (backend, r) in enumerate(results.items()):
        ax.bar([k + 0.4 * i for k in range(len(keys))], [r[k] for k in keys], 0.4, label=backend)
    ax.set_xticks([k + 0.2 for k in range(len(keys))], ["ms / trial\n(slots of 16)", "ms / trial\n(one by one)",
                                                        "ms / top-102\nquery"])
    ax.set_ylabel("milliseconds (median)")
    ax.legend()
    fig.savefig(args.out + ".png", dpi=110)


if __name__ == "__main__":
    main()
