"""Benchmark: ``tunewise tune`` on the blocks modern networks are made of, and on two full networks, against
onnxruntime and PyTorch eager.

::

    .venv/bin/python bench/modern_blocks.py                            # the zoo's seven blocks, 2 minutes each
    .venv/bin/python bench/modern_blocks.py --models mbconv,llama-block --time-budget 30s --out /tmp/blocks.json
    .venv/bin/python bench/modern_blocks.py --networks                 # efficientnet-b0 and yolo, 10 minutes each

``--models`` takes zoo names (by default the blocks, :data:`tunewise.zoo.BLOCKS`) and held-out models' names
(:mod:`heldout_models`, written as ``.pt2`` and ONNX files with weights seeded by ``--seed``); ``--networks``
is the two full-size held-out networks, ``efficientnet-b0`` (224x224) and ``yolo`` (320x320), with a time
budget of 10 minutes unless ``--time-budget`` says otherwise (2 minutes for the others).

Each model is tuned in a process of its own (a crash loses that model only, recorded with its error) as
``tunewise tune MODEL --time-budget T`` tunes it (:func:`tunewise.job.workflow.tune`, the default settings, a store
of its own, ``T`` covering the whole job): import, tuning, compilation, verification against PyTorch, and the
artifact timed in turn with onnxruntime and PyTorch eager, round by round in fresh processes
(:func:`tunewise.delivery.timing.time_side_by_side`, as :func:`headline.delivered` times it). Then onnxruntime runs
the model's ONNX export with its profiler on, and its convolution and matmul nodes are paired with the run's
tasks of the same operator (:func:`ort_kernels.pair`).

Reported per model: ``tuned_ms``, ``onnxruntime_ms``, ``eager_ms`` and the tuned model's median per-round
ratios ``to_onnxruntime`` and ``to_eager``; ``untuned_estimate_ms`` and ``estimate_ms`` (the tasks' default
and best latencies, weighted), ``trials``, ``tasks``, ``job_s``, ``max_error``; ``heaviest_task``, the task
holding most of the tuned estimate (as ``tunewise show`` gives it: its share, weight, trials, best and default
latency); ``kernels``, the paired operators (``ort_kernels.pair``), and ``loses_most``, the paired row where
tunewise's time exceeds onnxruntime's by the most (``None`` where none does, or the profile failed: then
``kernels_error``). ``--out`` (default ``bench/results/current/modern-blocks-CPU.json``, or
``modern-networks-CPU.json`` for ``--networks``, ``CPU`` the ``mcpu`` :func:`tunewise.target.resolve` detects)
holds them with the command line, commit and CPU (:mod:`provenance`), written after every model; ``--resume``
makes only the models it lacks or that failed. ``--keep DIR`` keeps each model's store as ``DIR/MODEL.db``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile

import provenance

from tunewise import infinity, zoo

NETWORKS = ("efficientnet-b0", "yolo")
BLOCK_BUDGET, NETWORK_BUDGET = "2m", "10m"
PROFILE_RUNS, PROFILE_WARMUP = 50, 10


def source_of(name: str, folder: str, seed: int) -> str:
    """The source ``tunewise tune`` takes for ``name``: a zoo name as it is, a held-out model as its ``.pt2``
    file written to ``folder``."""
    import heldout_models

    if name in zoo.MODELS:
        return name
    if name in heldout_models.MODELS:
        return heldout_models.write(name, folder, seed)[0]
    raise SystemExit(f"unknown model {name!r}: a zoo name or a held-out model ({', '.join(heldout_models.MODELS)})")


def onnx_file(name: str, source: str, folder: str, seed: int) -> str:
    """The ONNX file of ``name``: a held-out model's beside its ``.pt2``, a zoo model exported to ``folder``."""
    if source.endswith(".pt2"):
        return source.removesuffix(".pt2") + ".onnx"
    import torch

    module, inputs = zoo.get(name, seed=seed)
    path = os.path.join(folder, f"{name}.onnx")
    torch.onnx.export(module, inputs, path, dynamo=False)
    return path


def heaviest_task(summary) -> dict:
    """The task of a run (a :class:`tunewise.report.RunSummary`) holding most of its tuned estimate
    (``best_ms``: ``None`` where it has no measured trial)."""
    task = max(summary.tasks, key=lambda t: t.latency_share)
    return {"name": task.name, "share": task.latency_share, "weight": task.weight, "trials": task.trials,
            "best_ms": infinity.to_json(task.best * 1e3),
            "default_ms": task.default_latency * 1e3}


def kernels(store, run: int, onnx_path: str) -> dict:
    """onnxruntime's profile of ``onnx_path`` paired with run ``run``'s tasks (:func:`ort_kernels.pair`), and the
    paired row tunewise loses most on (``loses_most``)."""
    import ort_kernels
    from stored_run import run_settings

    from tunewise import stores
    from tunewise import target as targets
    from tunewise.job import prepare

    spec = store.get_run(run)
    settings, target = run_settings(spec.settings, None, None), targets.resolve(spec.target)
    model = prepare.load_model(settings.source, settings, target=target)
    nodes, call = ort_kernels.profile_onnxruntime(onnx_path, list(model.inputs), PROFILE_RUNS, PROFILE_WARMUP)
    paired = ort_kernels.pair(nodes, ort_kernels.best_tasks(model, store, stores.StoreDatabase(store, target=target),
                                                            run))
    losing = [row for row in paired["paired"] if row["tunewise_s"] > row["ort_s"]]
    return {"onnxruntime_call_s": call, **paired,
            "loses_most": max(losing, key=lambda r: r["tunewise_s"] - r["ort_s"], default=None)}


def measure(name: str, seconds: float, seed: int, store_path: str) -> dict:
    """Tune, compile and time model ``name`` as ``tunewise tune`` does, with a time budget of ``seconds``; then
    pair onnxruntime's kernels with the run's tasks."""
    from tunewise import stores
    from tunewise.budget import Budget
    from tunewise.job import workflow
    from tunewise.report import summarize

    with tempfile.TemporaryDirectory(prefix="modern-blocks-") as folder:
        source = source_of(name, folder, seed)
        url = f"sqlite:///{store_path}"
        result = workflow.tune(source, store=url, output=os.path.join(folder, "artifact"), progress=False,
                               budget=Budget(time_budget=seconds), seed=seed)
        references = result.references()
        entry = {"tuned_ms": result.tuned_latency * 1e3,
                 "onnxruntime_ms": None if "onnxruntime" not in references else references["onnxruntime"] * 1e3,
                 "eager_ms": None if "torch_eager" not in references else references["torch_eager"] * 1e3,
                 "to_onnxruntime": result.ratios.get("onnxruntime"), "to_eager": result.ratios.get("torch_eager"),
                 "untuned_estimate_ms": result.untuned_estimate * 1e3, "estimate_ms": result.estimated_latency * 1e3,
                 "trials": result.trials, "failures": result.failures, "tasks": result.tasks,
                 "tuning_s": result.tuning_seconds, "job_s": sum(result.phase_seconds.values()),
                 "phase_s": result.phase_seconds, "max_error": result.max_error, "records": result.records,
                 "stopped_by": result.stopped_by, "timing": result.timing}
        store = stores.create(url, must_exist=True)
        try:
            entry["heaviest_task"] = heaviest_task(summarize(store, result.run))
            try:
                entry["kernels"] = kernels(store, result.run, onnx_file(name, source, folder, seed))
                entry["loses_most"] = entry["kernels"].pop("loses_most")
            except Exception as err:  # the profile is extra: the timed result stands without it
                entry["loses_most"], entry["kernels_error"] = None, f"{type(err).__name__}: {err}"
        finally:
            store.close()
    return entry


def run_alone(name: str, args, seconds: float, store_path: str) -> dict:
    """:func:`measure` of ``name`` in a fresh process; an entry with its ``error`` when that process fails."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, os.path.abspath(__file__), "--one", name, "--seconds", str(seconds),
                   "--seed", str(args.seed), "--store", store_path, "--out", out.name]
        done = subprocess.run(command, stdout=sys.stdout, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            return {"error": f"exit code {done.returncode}: {lines[-1] if lines else 'no message'}"}
        with open(out.name) as f:
            return json.load(f)


def default_out(target, networks: bool) -> str:
    """``bench/results/current/modern-blocks-CPU.json`` (``modern-networks-...`` for the networks), ``CPU``
    the ``mcpu`` of ``target`` (a TVM target)."""
    cpu = str(target.attrs.get("mcpu", "generic"))
    return f"bench/results/current/modern-{'networks' if networks else 'blocks'}-{cpu}.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help=f"zoo and held-out models' names (default: {','.join(zoo.BLOCKS)})")
    parser.add_argument("--networks", action="store_true", help=f"the full networks {' and '.join(NETWORKS)}")
    parser.add_argument("--time-budget", help=f"per model, the whole job (default {BLOCK_BUDGET}; "
                                              f"{NETWORK_BUDGET} with --networks)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="the results (default bench/results/current/modern-blocks-CPU.json)")
    parser.add_argument("--resume", action="store_true", help="keep the models --out holds, make the others")
    parser.add_argument("--keep", metavar="DIR", help="keep each model's store in DIR (MODEL.db)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one model, its entry to --out
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        entry = measure(args.one, args.seconds, args.seed, args.store)
        with open(args.out, "w") as f:
            json.dump(entry, f)
        return

    from tunewise import target as targets
    from tunewise.cli import parse_duration
    from tunewise.errors import InputError

    try:
        seconds = parse_duration(args.time_budget or (NETWORK_BUDGET if args.networks else BLOCK_BUDGET))
    except InputError as err:
        raise SystemExit(str(err)) from None
    names = args.models.split(",") if args.models else list(NETWORKS if args.networks else zoo.BLOCKS)
    target = targets.resolve(None)
    out = args.out or default_out(target, args.networks)
    header = {"cpu": provenance.cpu_model(), "target": str(target), "time_budget_s": seconds, "seed": args.seed}
    models: dict = {}
    if args.resume and os.path.exists(out):
        with open(out) as f:
            kept = json.load(f)
        if any(kept.get(key) != value for key, value in header.items()):
            raise SystemExit(f"{out} was made with other settings or on another CPU")
        models = {name: entry for name, entry in kept["models"].items() if "error" not in entry}
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="modern-blocks-stores-") as stores_folder:
        for name in names:
            if name in models:
                continue
            store_path = os.path.join(os.path.abspath(args.keep or stores_folder), f"{name}.db")
            with contextlib.suppress(FileNotFoundError):
                os.remove(store_path)  # a store of its own: an earlier run's records would join its best
            entry = run_alone(name, args, seconds, store_path)
            models[name] = {**entry, "provenance": provenance.stamp()}
            with open(out, "w") as f:
                json.dump(provenance.stamped({**header, "models": models}), f, indent=1)
            print(name, {k: v for k, v in entry.items() if k not in ("kernels", "phase_s", "timing")}, flush=True)


if __name__ == "__main__":
    main()
