"""Where onnxruntime's CPU kernels beat a tuned run's: its profiler, per convolution and matmul, against the
run's best record of the same operator.

Exports the run's model to ONNX, runs it in onnxruntime (the default session, as the references are timed)
with profiling on, and averages each node's kernel time over ``--runs`` calls after a warm-up. Each
onnxruntime convolution or matmul node (``PAIRED_OPS``) is paired with the run's convolution and matmul tasks
whose output (a task's last argument) has the dimensions of the node's output and whose inputs include one
with the dimensions of the node's first input, in any order: the same operator whatever either side's layout
(the profile leaves pre-packed weights out). Nodes and tasks that pair up, directly or through each other,
make one row, summed on both sides: onnxruntime over its nodes, tunewise as each task's weight times its best
recorded latency. A row is one operator shape where the shapes can be told apart this way, and a few (a
stage of a convnet, where residual additions share tensors) where not. What is left on either side
(onnxruntime's other nodes, the tasks nothing paired with) is totalled apart, beside onnxruntime's whole
call.

    python bench/ort_kernels.py --store sqlite:///tunewise.db --run 1 --out bench/results/ort-kernels-resnet18.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from collections import defaultdict

import networkx
import provenance
from stored_run import run_settings

from tunewise import stores, zoo
from tunewise import target as targets
from tunewise.job import prepare

PAIRED_OPS = ("Conv", "FusedConv", "MatMul", "Gemm", "FusedGemm", "FusedMatMul")
PAIRED_TASKS = ("conv", "matmul", "dense")  # what the name of a convolution's or a matmul's task holds


def dims(shape) -> tuple:
    """A tensor's dimensions whatever its layout (NCHW and NHWC alike): sorted, without the ones."""
    return tuple(sorted(int(d) for d in shape if int(d) != 1))


def first_shape(type_shapes) -> list | None:
    """The first shape of a profile's ``[{"float": [1, 64, 56, 56]}, ...]``."""
    return list(next(iter(type_shapes[0].values()))) if type_shapes else None


def node_times(profile_path: str, calls: int) -> list[dict]:
    """Each node's mean kernel time (seconds) over the last ``calls`` calls an onnxruntime profile holds, with
    its op type and the shapes of its first input and output (``None`` where the profile has none)."""
    with open(profile_path) as f:
        events = json.load(f)
    nodes: dict = {}
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        args = event["args"]
        name = event["name"].removesuffix("_kernel_time")
        node = nodes.setdefault(name, {"name": name, "op": args["op_name"], "us": [],
                                       "input": first_shape(args.get("input_type_shape")),
                                       "output": first_shape(args.get("output_type_shape"))})
        node["us"].append(event["dur"])
    return [{**n, "seconds": statistics.mean(n.pop("us")[-calls:]) / 1e6} for n in nodes.values()]


def profile_onnxruntime(model_path: str, inputs, runs: int, warmup: int) -> tuple[list[dict], float]:
    """Per-node mean kernel times on ``inputs`` (numpy arrays, in the model's input order) over ``runs`` calls
    after ``warmup``, and the median wall time of a call (seconds) in a session without profiling."""
    import time

    import onnxruntime

    plain = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(plain.get_inputs(), inputs, strict=True)}
    walls = []
    for i in range(warmup + runs):
        start = time.perf_counter()
        plain.run(None, feeds)
        if i >= warmup:
            walls.append(time.perf_counter() - start)
    options = onnxruntime.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(os.path.dirname(model_path), "ort-profile")
    profiled = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    for _ in range(warmup + runs):
        profiled.run(None, feeds)
    return node_times(profiled.end_profiling(), runs), statistics.median(walls)


def best_tasks(model, store, database, run: int) -> list[dict]:
    """Each task of run ``run`` (``model``: the run's extracted model): its name, weight, best recorded latency
    (``seconds``; its default latency when it has no record: ``tuned`` false) and its arguments' dimensions."""
    from tunewise.lowering.tasks import args_info

    tasks = []
    for task, mod, saved in zip(model.tasks, model.task_mods, store.get_tasks(run), strict=True):
        workload = database.workload_id(mod)
        best = store.top_trials(workload, 1, database.target) if workload is not None else []
        tasks.append({"name": task.name, "weight": task.weight,
                      "seconds": best[0].latency if best else saved.default_latency, "tuned": bool(best),
                      "dims": [dims(a.shape) for a in args_info(mod)]})
    return tasks


def pair(nodes: list[dict], tasks: list[dict]) -> dict:
    """onnxruntime's ``nodes`` (:func:`node_times`) and a run's ``tasks`` (:func:`best_tasks`) paired into rows
    (``paired``, by onnxruntime's time, most first), with what is left on either side and the totals."""
    # a bipartite graph of onnxruntime's nodes and our tasks, an edge where a task's arguments match the node's
    # input and output; each connected component is a row
    graph = networkx.Graph()
    unpaired_nodes = defaultdict(float)
    for i, node in enumerate(nodes):
        matches = [] if node["op"] not in PAIRED_OPS or not (node["input"] and node["output"]) else [
            t["name"] for t in tasks if any(word in t["name"] for word in PAIRED_TASKS)
            and dims(node["input"]) in t["dims"][:-1] and dims(node["output"]) == t["dims"][-1]]
        if not matches:
            unpaired_nodes[node["op"]] += node["seconds"]
        graph.add_edges_from((("node", i), ("task", name)) for name in matches)
    by_name = {t["name"]: t for t in tasks}
    rows = []
    for component in networkx.connected_components(graph):
        members = [nodes[i] for kind, i in component if kind == "node"]
        names = sorted(name for kind, name in component if kind == "task")
        ort_s = sum(n["seconds"] for n in members)
        ours = sum(by_name[n]["weight"] * by_name[n]["seconds"] for n in names)
        rows.append({"ops": sorted({n["op"] for n in members}), "nodes": len(members),
                     "shapes": sorted({(tuple(n["input"]), tuple(n["output"])) for n in members}),
                     "tasks": names, "ort_s": ort_s, "tunewise_s": ours, "ratio": ours / ort_s})
    rows.sort(key=lambda r: -r["ort_s"])
    paired_tasks = {name for row in rows for name in row["tasks"]}
    unpaired_tasks = {t["name"]: t["weight"] * t["seconds"] for t in tasks if t["name"] not in paired_tasks}
    return {"onnxruntime_nodes_s": sum(n["seconds"] for n in nodes), "paired": rows,
            "onnxruntime_paired_s": sum(r["ort_s"] for r in rows),
            "tunewise_paired_s": sum(r["tunewise_s"] for r in rows),
            "onnxruntime_unpaired_s": dict(unpaired_nodes), "tunewise_unpaired_s": unpaired_tasks,
            "tunewise_estimate_s": sum(t["weight"] * t["seconds"] for t in tasks),
            "untuned_tasks": [t["name"] for t in tasks if not t["tuned"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--model", help="zoo name (default: the run's own source)")
    parser.add_argument("--level", default=None, help="graph level (default: the run's own)")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import torch

    store = stores.create(args.store, must_exist=True)
    spec = store.get_run(args.run)
    settings = run_settings(spec.settings, args.model, args.level)
    if settings.source not in zoo.MODELS:
        raise SystemExit(f"{settings.source}: a zoo model is needed (it is exported to ONNX here)")
    target = targets.resolve(spec.target)
    model = prepare.load_model(settings.source, settings, target=target)
    database = stores.StoreDatabase(store, target=target)

    module, inputs = zoo.get(settings.source, seed=settings.seed)
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.onnx")
        torch.onnx.export(module.eval(), inputs, path, dynamo=False)
        nodes, ort_wall = profile_onnxruntime(path, [t.detach().numpy() for t in inputs], args.runs, args.warmup)

    tasks = best_tasks(model, store, database, args.run)
    result = {"store": args.store, "run": args.run, "model": model.name, "runs": args.runs,
              "onnxruntime_call_s": ort_wall, **pair(nodes, tasks)}
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    unpaired_nodes = result["onnxruntime_unpaired_s"]
    print(f"{'op':10s} {'input':>16s} {'output':>16s} {'nodes':>5s} {'tasks':>5s} {'ort':>8s} {'ours':>8s} "
          f"{'ours/ort':>8s}  (ms)")
    for r in result["paired"]:
        data, out = ("x".join(map(str, s)) for s in r["shapes"][0])
        print(f"{'+'.join(r['ops']):10s} {data:>16s} {out:>16s} {r['nodes']:5d} {len(r['tasks']):5d} "
              f"{1e3 * r['ort_s']:8.3f} {1e3 * r['tunewise_s']:8.3f} {r['ratio']:8.2f}"
              + ("" if len(r["shapes"]) == 1 else f"  (+{len(r['shapes']) - 1} shapes)"))
    print(f"paired: ort {1e3 * result['onnxruntime_paired_s']:.2f} ms, ours {1e3 * result['tunewise_paired_s']:.2f}"
          f" ms; unpaired: ort {1e3 * sum(unpaired_nodes.values()):.2f} ms "
          f"({', '.join(f'{op} {1e3 * s:.2f}' for op, s in sorted(unpaired_nodes.items(), key=lambda x: -x[1]))}),"
          f" ours {1e3 * sum(result['tunewise_unpaired_s'].values()):.2f} ms; ort call {1e3 * ort_wall:.2f} ms, "
          f"ort nodes {1e3 * result['onnxruntime_nodes_s']:.2f} ms, our estimate "
          f"{1e3 * result['tunewise_estimate_s']:.2f} ms")


if __name__ == "__main__":
    main()
