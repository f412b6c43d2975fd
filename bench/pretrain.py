"""Train the pretrained cost models tunewise ships, one per ISA class, from the dataset files of bench/dataset.py.

    .venv/bin/python bench/pretrain.py /work/dataset/tunewise-dataset-v1-avx2-znver2.json.gz
    .venv/bin/python bench/pretrain.py DATASET... --out src/tunewise/knowledge --rounds 200

Each dataset file holds one CPU's trials; the files of one ISA class (:func:`tunewise.target.isa_class`) train
one booster, written to ``OUT/cost-model-ISA.json.gz`` (:mod:`tunewise.cost_models._pretrained`). The features are
MetaSchedule's ``PerStoreFeature`` of each record's scheduled module, as its ``XGBModel`` extracts them; the
label is the trial's throughput relative to the fastest trial of its workload; the booster is fitted as
``XGBModel`` fits one (its objective and configuration), seeded by ``--seed``, for ``--rounds`` rounds. The
runs of the held-out models (bench/heldout_models.py) are refused, should a dataset file hold any. For the same
dataset files, seed and rounds the file written is the same, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

import dataset
import heldout_models
import numpy as np

ROUNDS = 200  # boosting rounds of a shipped model (eta 0.2, depth 10: a few MB at most)


@dataclass
class Features:
    """The dataset's trials as a cost model sees them: per-store features, latency, workload and model."""

    per_store: list  # one (stores, width) float32 array per trial
    latencies: np.ndarray
    workloads: np.ndarray  # the workload id of each trial (its group)
    models: np.ndarray  # the run's model of each trial
    order: np.ndarray  # the trial's position in its run (the order it was measured in)
    width: int


def features(data: dict) -> Features:
    """The features of every trial of a dataset file (:func:`dataset.read`) whose record replays on its
    workload; a trial whose record fails to replay, or whose module has no stores, is left out."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    target = tvm.target.Target(json.loads(data["cpu"]["target"]))
    models = {r["run"]: r["model"] for r in data["runs"]}
    held = sorted(set(models.values()) & set(heldout_models.MODELS))
    if held:
        raise SystemExit(f"pretrain: the dataset holds held-out models' runs ({', '.join(held)}); export it again")
    extractor = ms.feature_extractor.PerStoreFeature()
    by_workload: dict[str, list[tuple[int, dict]]] = {}
    for i, trial in enumerate(data["trials"]):
        by_workload.setdefault(str(trial["workload"]), []).append((i, trial))
    rows, latencies, workloads, owners, order = [], [], [], [], []
    counts: dict[int, int] = {}
    seq = {}  # each trial's position in its run
    for i, trial in enumerate(data["trials"]):
        seq[i] = counts.get(trial["run"], 0)
        counts[trial["run"]] = seq[i] + 1
    for key in sorted(by_workload, key=int):
        mod = tvm.ir.load_json(data["workloads"][key]["mod"])
        workload = ms.database.Workload(mod)
        context = ms.TuneContext(mod, target=target, num_threads=1)
        candidates, kept = [], []
        for i, trial in by_workload[key]:
            try:
                record = ms.database.TuningRecord.from_json(json.loads(trial["record"]), workload)
                candidates.append(record.as_measure_candidate())
            except Exception:  # noqa: BLE001 (a record of another lowering: it does not replay here)
                continue
            kept.append((i, trial))
        if not candidates:
            continue
        for (i, trial), x in zip(kept, extractor.extract_from(context, candidates), strict=True):
            x = x.numpy().astype("float32")
            if not len(x):
                continue
            rows.append(x)
            latencies.append(trial["latency"])
            workloads.append(int(key))
            owners.append(models[trial["run"]])
            order.append(seq[i])
    width = rows[0].shape[1] if rows else 0
    return Features(rows, np.array(latencies), np.array(workloads), np.array(owners), np.array(order), width)


def fit(feats: Features, keep: np.ndarray, *, seed: int, rounds: int, nthread: int | None = None):
    """A booster fitted on the trials ``keep`` selects (a boolean mask), labelled by relative throughput."""
    from tunewise.cost_models import _pretrained

    index = np.flatnonzero(keep)
    labels = _pretrained.relative_throughput(feats.latencies[index], feats.workloads[index])
    return _pretrained.boost([feats.per_store[i] for i in index], labels, seed=seed, rounds=rounds,
                             nthread=nthread)


def load(paths: list[str]) -> dict[str, tuple[list[tuple[str, dict]], Features]]:
    """The dataset files ``paths`` by ISA class: each class's ``(path, data)`` and their trials' features (the
    workloads of each file its own groups); a file of a CPU without an ISA class is skipped, and so is a class
    none of whose trials replays."""
    by_class: dict[str, list[tuple[str, dict]]] = {}
    for path in paths:
        data = dataset.read(path)
        isa = data["cpu"]["isa_class"]
        if isa is None:
            print(f"pretrain: {path} is of a CPU without an ISA class tunewise ships models for; skipped",
                  file=sys.stderr)
            continue
        by_class.setdefault(isa, []).append((path, data))
    loaded = {}
    for isa, parts in by_class.items():
        merged = [features(data) for _, data in parts]
        feats = Features([x for f in merged for x in f.per_store], np.concatenate([f.latencies for f in merged]),
                         np.concatenate([f.workloads + 10**9 * n for n, f in enumerate(merged)]),
                         np.concatenate([f.models for f in merged]), np.concatenate([f.order for f in merged]),
                         merged[0].width)
        if not feats.per_store:
            print(f"pretrain: no trial of {isa} replays; nothing written", file=sys.stderr)
            continue
        loaded[isa] = (parts, feats)
    return loaded


def main(argv: list[str] | None = None) -> list[str]:
    from tunewise import cost_models
    from tunewise.cost_models import _pretrained
    from tunewise.tuning import tvm_env

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", help="dataset files of bench/dataset.py export")
    parser.add_argument("--out", default=_pretrained.FOLDER)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="XGBoost threads (1: the same file on any machine)")
    args = parser.parse_args(argv)
    written = []
    for isa, (parts, feats) in sorted(load(args.datasets).items()):
        booster = fit(feats, np.ones(len(feats.per_store), dtype=bool), seed=args.seed, rounds=args.rounds,
                      nthread=args.threads)
        trained = {"datasets": [os.path.basename(p) for p, _ in parts],
                   "cpus": sorted({d["cpu"]["mcpu"] or "generic" for _, d in parts}),
                   "models": sorted(set(feats.models.tolist())), "trials": len(feats.per_store),
                   "workloads": len(set(feats.workloads.tolist())), "rounds": args.rounds, "seed": args.seed,
                   "dataset_versions": sorted({json.dumps(d["versions"], sort_keys=True) for _, d in parts}),
                   "versions": tvm_env.versions()}
        prior = cost_models.Prior(booster, isa, feats.width, trained)
        path = _pretrained.save(prior, _pretrained.path_for(isa, args.out))
        written.append(path)
        print(f"{path}: {trained['trials']} trials of {trained['workloads']} workloads, {len(trained['models'])} "
              f"models, {os.path.getsize(path) / 1e6:.2f} MB")
    return written


if __name__ == "__main__":
    main()
