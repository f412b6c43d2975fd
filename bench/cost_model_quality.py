"""How well the pretrained cost model ranks candidates of workloads it was not trained on, against the cold model.

    .venv/bin/python bench/cost_model_quality.py /work/dataset/tunewise-dataset-v1-avx2-znver2.json.gz

Leave one model out, per ISA class (the dataset files of its CPUs together): for each model of the dataset
with at least ``--min-trials`` trials, a booster is trained as bench/pretrain.py trains the shipped one, on
the trials of every workload the model does not have (a workload it shares with another model is left out of
training too), and ranks the model's own trials, workload by workload. Per workload with more than ``--top-k``
trials: Kendall's tau between the scores and the measured throughputs, and the top-k recall (the share of the
``k`` truly fastest candidates among the ``k`` best scored). The figures are averaged over the model's
workloads, then over the models.

- ``pretrained``: the booster alone, what ranks a task's first slot;
- ``cold``: the cold model at a run's start, uniform random scores (tau 0, recall ``k / n`` in expectation,
  reported exactly);
- after ``n`` of the model's own trials (``--own``, in the order its run measured them), ranking the rest:
  ``cold-trained`` (MetaSchedule's ``XGBModel`` fitted on those alone, as the cold model is once warmed up),
  ``continued`` (the pretrained booster boosted ``CONTINUED_ROUNDS`` more rounds on them) and ``blend`` (the
  mean of the ranks by the pretrained and the cold-trained boosters, what a run does:
  :class:`tunewise.cost_models.XGB`).

Writes ``bench/results/current/cost-model-quality-ISA.json`` (``--out``) with provenance.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import pretrain
import provenance
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))
CONTINUED_ROUNDS = 20  # trees the pretrained booster grows on a model's own trials in the "continued" variant


def _rank(scores: np.ndarray) -> np.ndarray:
    return stats.rankdata(scores) / len(scores)


def quality(scores: np.ndarray, latencies: np.ndarray, k: int) -> tuple[float, float]:
    """Kendall's tau of ``scores`` against throughput, and the top-``k`` recall."""
    throughput = 1.0 / latencies
    tau = stats.kendalltau(scores, throughput).statistic
    best = set(np.argsort(-throughput, kind="stable")[:k])
    chosen = set(np.argsort(-scores, kind="stable")[:k])
    return (0.0 if np.isnan(tau) else float(tau)), len(best & chosen) / k


def _per_workload(feats, index: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[float, float]]:
    rows = []
    for w in np.unique(feats.workloads[index]):
        mine = feats.workloads[index] == w
        if mine.sum() > k:
            rows.append(quality(scores[mine], feats.latencies[index][mine], k))
    return rows


def _cold(feats, index: np.ndarray, k: int) -> list[tuple[float, float]]:
    counts = [int((feats.workloads[index] == w).sum()) for w in np.unique(feats.workloads[index])]
    return [(0.0, k / n) for n in counts if n > k]


def _mean(rows: list[tuple[float, float]]) -> dict | None:
    if not rows:
        return None
    return {"kendall_tau": float(np.mean([r[0] for r in rows])), "top_k_recall": float(np.mean([r[1] for r in rows])),
            "workloads": len(rows)}


def evaluate(feats, *, rounds: int, seed: int, k: int, own: list[int], min_trials: int) -> dict:
    from tunewise.cost_models import _pretrained, _xgb

    per_model = {}
    for model in sorted(set(feats.models.tolist())):
        mine = feats.models == model
        if mine.sum() < min_trials:
            continue
        theirs = np.isin(feats.workloads, np.unique(feats.workloads[mine]))
        if (~theirs).sum() == 0:
            continue
        booster = pretrain.fit(feats, ~theirs, seed=seed, rounds=rounds, nthread=1)
        index = np.flatnonzero(mine)
        prior = _pretrained.predict(booster, [feats.per_store[i] for i in index])
        row = {"trials": int(mine.sum()), "trained_on": int((~theirs).sum()),
               "pretrained": _mean(_per_workload(feats, index, prior, k)), "cold": _mean(_cold(feats, index, k))}
        order = index[np.argsort(feats.order[index], kind="stable")]
        for n in own:
            seen, rest = order[:n], np.sort(order[n:])
            if len(seen) < n or len(rest) <= k:
                continue
            xs = [feats.per_store[i] for i in seen]
            ys = _pretrained.relative_throughput(feats.latencies[seen], feats.workloads[seen])
            cold = _xgb.XGB(seed=seed, num_warmup_samples=0, num_tuning_cores=1, verbose_eval=0)
            cold._train(xs, ys)
            continued = _pretrained.boost(xs, ys, seed=seed, rounds=CONTINUED_ROUNDS, prior=booster, nthread=1)
            test = [feats.per_store[i] for i in rest]
            cold_scores = _pretrained.predict(cold.booster, test)
            prior_scores = _pretrained.predict(booster, test)
            row[f"after_{n}"] = {
                "cold-trained": _mean(_per_workload(feats, rest, cold_scores, k)),
                "continued": _mean(_per_workload(feats, rest, _pretrained.predict(continued, test), k)),
                "blend": _mean(_per_workload(feats, rest, _rank(cold_scores) + _rank(prior_scores), k)),
                "pretrained": _mean(_per_workload(feats, rest, prior_scores, k)),
                "cold": _mean(_cold(feats, rest, k))}
        per_model[model] = row
        print(model, json.dumps({key: value for key, value in row.items() if key != "trials"}), flush=True)
    summary = {}
    for key in ("pretrained", "cold"):
        rows = [m[key] for m in per_model.values() if m[key]]
        summary[key] = _average(rows)
    for n in own:
        for key in ("cold-trained", "continued", "blend", "pretrained"):
            rows = [m[f"after_{n}"][key] for m in per_model.values() if m.get(f"after_{n}", {}).get(key)]
            summary[f"after_{n}_{key}"] = _average(rows)
    return {"models": per_model, "mean_over_models": summary}


def _average(rows: list[dict]) -> dict | None:
    if not rows:
        return None
    return {"kendall_tau": float(np.mean([r["kendall_tau"] for r in rows])),
            "top_k_recall": float(np.mean([r["top_k_recall"] for r in rows])), "models": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--rounds", type=int, default=pretrain.ROUNDS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--own", default="16,64", help="own-trial counts of the online comparison")
    parser.add_argument("--min-trials", type=int, default=32)
    parser.add_argument("--out", help="result file (default bench/results/current/cost-model-quality-ISA.json)")
    args = parser.parse_args()
    for isa, (parts, feats) in sorted(pretrain.load(args.datasets).items()):
        result = evaluate(feats, rounds=args.rounds, seed=args.seed, k=args.top_k,
                          own=[int(n) for n in args.own.split(",")], min_trials=args.min_trials)
        cpus = sorted({data["cpu"]["mcpu"] or "generic" for _, data in parts})
        out = args.out or os.path.join(HERE, "results", "current", f"cost-model-quality-{isa}.json")
        header = {"datasets": [os.path.basename(p) for p, _ in parts], "isa_class": isa, "cpus": cpus,
                  "dataset_versions": sorted({json.dumps(d["versions"], sort_keys=True) for _, d in parts}),
                  "rounds": args.rounds, "seed": args.seed, "top_k": args.top_k}
        with open(out, "w") as f:
            json.dump(provenance.stamped({**header, **result}), f, indent=1)
        print(f"wrote {out}: {json.dumps(result['mean_over_models'])}")


if __name__ == "__main__":
    main()
