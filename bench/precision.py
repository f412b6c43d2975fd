"""Benchmark: models tuned in a lower precision against OpenVINO in its default precision, one invocation.

::

    .venv/bin/python bench/precision.py --models resnet50,minilm --precision bfloat16 --minutes 10 \
        --out bench/results/current/precision-bfloat16-CPU.json

Per model (the held-out models of :mod:`heldout_models`, written as ``.pt2`` files with weights seeded by
``--seed``, or a zoo name or model file): ``tunewise.tune`` with ``--precision`` and the default settings for
``--minutes`` of tuning time, from an empty store, as ``tunewise tune`` runs it; its summary holds the tuned
latency beside PyTorch eager, onnxruntime, OpenVINO in its default precision and OpenVINO f32, all taking turns
round by round in fresh processes, and the largest error of the outputs against the source framework's float32
ones, relative to each output's scale (``max_error``: the example input; ``accuracy``: it and 8 further random
inputs, and a classifier's arg-max agreement). ``--out`` holds one row a model, written after each, with the command
line, the commit and the CPU model (:mod:`provenance`).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import heldout_models
import provenance

import tunewise
from tunewise.target import host_cpu


def source_of(name: str, folder: str, seed: int) -> str:
    """What ``tunewise.tune`` takes for ``name``: a held-out model written as a ``.pt2`` file, else ``name``."""
    return heldout_models.write(name, folder, seed)[0] if name in heldout_models.MODELS else name


def row(name: str, result) -> dict:
    """The figures of one model's run (milliseconds; ratios: tuned over each reference in the same rounds)."""
    ms = lambda seconds: None if seconds is None else seconds * 1e3  # noqa: E731
    return {"model": name, "precision": result.precision, "tuned_ms": ms(result.tuned_latency),
            "estimated_ms": ms(result.estimated_latency),
            "references_ms": {key: ms(latency) for key, latency in result.references().items()},
            "ratios": result.ratios, "max_error": result.max_error, "accuracy": result.accuracy,
            "tasks": result.tasks, "trials": result.trials,
            "tuning_s": result.tuning_seconds, "timing": result.timing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,minilm")
    parser.add_argument("--precision", default="bfloat16")
    parser.add_argument("--minutes", type=float, default=10.0, help="tuning time of each model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    results = {"target": host_cpu(), "precision": args.precision, "minutes": args.minutes, "models": []}
    with tempfile.TemporaryDirectory(prefix="tunewise-precision-") as folder:
        for name in args.models.split(","):
            result = tunewise.tune(source_of(name, folder, args.seed), precision=args.precision, seed=args.seed,
                                   budget=tunewise.Budget(time_budget=args.minutes * 60),
                                   store=f"sqlite:///{os.path.join(folder, name)}.db",
                                   output=os.path.join(folder, f"{name}-artifact"), progress=False)
            results["models"].append(row(name, result))
            print(json.dumps(results["models"][-1]))
            with open(args.out, "w") as f:
                json.dump(provenance.stamped(results), f, indent=1)


if __name__ == "__main__":
    main()
