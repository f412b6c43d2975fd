"""Tuning for GPU 0: per model, the compiled latency after 5 and 10 minutes of tuning beside PyTorch eager, its
single-stream CUDA graph and ``tunewise.runtime.aot``, with trials, failures and energy.

Run by hand on a GPU machine, one model per sitting if the machine is lent for minutes at a time (each
model's entry is merged into the file as it finishes)::

    python3 bench/studies/gpu/gpu_tune.py --models resnet18 --out bench/results/gpu-tune.json

On a lent machine whose commands last 10 minutes at most, ``scripts/gpu-long-tune`` runs it across two.

Each model is tuned by ``tunewise.tune`` with ``--target cuda`` for ``--minutes`` of tuning time (the whole
job's budget is that plus two minutes for the import, extraction, checks, compilation and timing: ResNet-18 on
an H200 took 17 s, 13 s and 58 s for the first, second and last two; the run reports its tuning time), with a
whole-model check every ``--check-every`` seconds: the check compiles the model with the records so far,
verifies it and times it in a fresh process, which gives the 5-minute point; the end of the run gives the
10-minute one. The references are timed at the end, in a fresh process on the same GPU, float32 throughout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

import tunewise
from tunewise import target as targets


def tune_one(name: str, minutes: float, check_every: float, work: str) -> dict:
    """One model tuned for GPU 0: its checks' and final latencies, references, trials, failures, energy."""
    result = tunewise.tune(name, target="cuda", budget=tunewise.Budget(time_budget=60 * minutes + 120),
                           check_every=check_every, store=f"sqlite:///{work}/{name}.db",
                           output=os.path.join(work, name), time_untuned=True)
    return {"tuned_latency_s": result.tuned_latency, "untuned_latency_s": result.untuned_latency,
            "checks": [{"tuning_s": p.elapsed, "latency_s": p.latency} for p in result.measured],
            "references_s": result.references(), "trials": result.trials, "failures": result.failures,
            "tuning_s": result.tuning_seconds, "phases_s": result.phase_seconds, "joules": result.joules,
            "joules_by_meter": result.joules_parts, "max_relative_error": result.max_error}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,mobilenetv2,transformer")
    parser.add_argument("--minutes", type=float, default=10.0, help="tuning time per model")
    parser.add_argument("--check-every", type=float, default=300.0, help="seconds of tuning between checks")
    parser.add_argument("--work", default="/tmp/tunewise-gpu-tune")
    parser.add_argument("--out", default=os.path.join("bench", "results", "gpu-tune.json"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    results = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            results = json.load(f)
    device = targets.cuda_description()
    if device is None:
        raise SystemExit("bench/studies/gpu/gpu_tune.py needs an NVIDIA GPU")
    for name in args.models.split(","):
        entry = tune_one(name, args.minutes, args.check_every, args.work)
        results.setdefault("models", {})[name] = {**entry, "device": device, "minutes": args.minutes,
                                                  "recorded": provenance.stamp()}
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
        print(json.dumps({name: entry}, indent=2), flush=True)


if __name__ == "__main__":
    main()
