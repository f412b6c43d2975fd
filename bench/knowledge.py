"""Benchmark: what the knowledge tunewise ships buys a run: cold, the bundled record base, the pretrained cost
model, and both, side by side in one invocation.

::

    .venv/bin/python bench/knowledge.py --models squeezenet1.1,resnet18,grouped --seconds 120 \
        --out bench/results/current/knowledge-2min-CPU.json

Per model (zoo names, ``.pt2``/``.onnx`` files, and the held-out models of :mod:`heldout_models`, which never
enter the dataset the knowledge is made from): one import and one extraction shared by every arm; each arm
(``--arms``) tunes from an empty store for ``--seconds`` of tuning time with the default settings but for
its knowledge, ``cold`` (``records_base="off"``, ``pretrained=False``), ``base`` (the bundled record base
only), ``pretrained`` (the pretrained cost model only) and ``both`` (the defaults); then the compiled models
of every arm are timed in turn, round after round, in one process (medians), and PyTorch eager and
onnxruntime in a fresh process (:func:`tunewise.delivery.timing.reference_latencies`). Each arm records its trials,
its estimate and how many tasks started from the base or were ranked by the pretrained model.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import heldout_models
import provenance

from tunewise import stores
from tunewise import target as targets
from tunewise.delivery import compile as compiler
from tunewise.delivery import timing
from tunewise.importing import frontend
from tunewise.job import prepare
from tunewise.lowering import tasks
from tunewise.settings import RunSettings
from tunewise.tuning import session, tvm_env

ARMS = {"cold": {"records_base": "off", "pretrained": False}, "base": {"pretrained": False},
        "pretrained": {"records_base": "off"}, "both": {}}


def source_of(name: str, folder: str, seed: int) -> str:
    """What ``frontend.load`` takes for ``name``: a held-out model written as a ``.pt2`` file, else ``name``."""
    return heldout_models.write(name, folder, seed)[0] if name in heldout_models.MODELS else name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="squeezenet1.1")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"some of {', '.join(ARMS)}")
    parser.add_argument("--seconds", type=float, default=120.0, help="tuning time of each arm")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    arms = args.arms.split(",")
    if unknown := [a for a in arms if a not in ARMS]:
        raise SystemExit(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")

    target = targets.resolve(None)
    tvm_env.prepare("llvm")
    measurer = prepare.make_measurer(target, RunSettings())
    folder = tempfile.mkdtemp(prefix="knowledge-")
    rows = []
    try:
        for name in args.models.split(","):
            source = source_of(name, folder, args.seed)
            imported = frontend.load(source)
            model = tasks.extract(imported, target, measurer=measurer)
            row, compiled = {"model": name, "tasks": len(model.tasks), "arms": {}}, []
            for arm in arms:
                store = stores.create("sqlite://")
                settings = RunSettings(source=source, seed=args.seed, **ARMS[arm],
                                       budget=session.Budget(time_budget=args.seconds))
                loop = prepare.open_session(model, settings, store=store, measurer=measurer)
                final = loop.run()
                tuned, error = compiler.compile_checked(model, stores.StoreDatabase(store, target=target))
                entry = {"trials": sum(s.trials for s in final.tasks), "max_relative_error": error,
                         "estimate_ms": 1e3 * loop.ledger.snapshot().estimated_latency(),
                         "base_tasks": len({t.task for t in store.get_trials(records=False)
                                            if t.origin == stores.FROM_BASE}),
                         "pretrained_tasks": loop.pretrained_tasks}
                row["arms"][arm] = entry
                compiled.append((arm, tuned))
                print(json.dumps({name: {arm: entry}}), flush=True)
            latencies, rounds = timing.time_models([c for _, c in compiled], imported.inputs, args.rounds)
            for (arm, _), seconds in zip(compiled, latencies, strict=True):
                row["arms"][arm]["compiled_ms"] = 1e3 * seconds
            row["timing_rounds"] = rounds
            references = timing.reference_latencies(source, imported.inputs)
            row["references_ms"] = {k: None if v is None else 1e3 * v for k, v in references.items()}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        measurer.close()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(provenance.stamped({"target": str(target), "isa": targets.isa_class(target),
                                      "seconds": args.seconds, "rows": rows}), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
