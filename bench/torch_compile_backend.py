"""Benchmark: what ``torch.compile(model, backend="tunewise")`` costs a program, on its first start and after.

::

    .venv/bin/python bench/torch_compile_backend.py --out bench/results/current/torch-compile-backend-CPU.json

A small convnet of its own (three convolutions with batch norms, pooling, a linear layer; random weights) is
compiled in three fresh processes, one after the other, sharing one ``$TUNEWISE_CACHE_DIR``:

- ``tune``: an empty cache, ``options={"time_budget": "60s"}``: the backend tunes the graph and writes its store
  and artifact;
- ``store``: the artifact folder deleted, so the backend compiles the graph from the store's records (no tuning);
- ``artifact``: the artifact kept, so the backend loads it.

Each process reports the seconds from its start to the end of ``import torch``, of its first compiled call, and
its largest difference from eager; the store's trial and run counts are read after each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from provenance import stamped

CHILD = r'''
import json, time
start = time.perf_counter()
import torch
imported = time.perf_counter()


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))

    def forward(self, x):
        return self.body(x)


torch.manual_seed(0)
model, x = SmallCNN().eval(), torch.randn(1, 3, 32, 32)
for m in model.modules():  # batch norms with statistics of their own, so outputs depend on the input
    if isinstance(m, torch.nn.BatchNorm2d):
        m.running_mean.uniform_(-0.1, 0.1)
        m.running_var.uniform_(0.5, 1.5)
with torch.no_grad():
    compiled = torch.compile(model, backend="tunewise", options={"time_budget": "60s", "progress": False},
                             dynamic=False)
    first = time.perf_counter()
    y = compiled(x)
    done = time.perf_counter()
    print(json.dumps({"import_torch_s": round(imported - start, 2), "first_call_s": round(done - first, 2),
                      "process_s": round(done - start, 2), "output_type": type(y).__name__,
                      "max_abs_error": float((y - model(x)).abs().max()),
                      "output_spread": float(y.std())}))
'''


def counts(store: str) -> dict:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return {"trials": db.execute("select count(*) from trials").fetchone()[0],
                "runs": db.execute("select count(*) from runs").fetchone()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="result JSON")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="tunewise-backend-")
    env = {**os.environ, "TUNEWISE_CACHE_DIR": cache}
    folder = os.path.join(cache, "torch-compile")
    rows = []
    try:
        for case in ("tune", "store", "artifact"):
            if case == "store":
                for name in os.listdir(folder):
                    if os.path.isdir(os.path.join(folder, name)):
                        shutil.rmtree(os.path.join(folder, name))
            done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"the {case} process failed: {done.stderr.strip().splitlines()[-1:]}")
            row = {"case": case, **json.loads(done.stdout.strip().splitlines()[-1]),
                   **counts(os.path.join(folder, "tunewise.db"))}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    with open(args.out, "w") as f:
        json.dump(stamped({"model": "small convnet, input 1x3x32x32", "options": {"time_budget": "60s"},
                           "rows": rows}), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
