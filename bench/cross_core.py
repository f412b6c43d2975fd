"""How far apart the machine's two cores are, minute by minute, beside a compiled model's latency.

On a 2-core virtual machine the two virtual CPUs can sit on cores that share a last-level cache or on cores
that do not, and the hypervisor moves them while a benchmark runs. This times both, in turn, for
``--seconds``: the one-way latency of a cache line passed between a thread pinned to CPU 0 and one pinned to
CPU 1 (a small C program, built here with ``cc``; 200,000 round trips), then the compiled model ``ARTIFACT``
(median of ``--calls`` calls on the seeded example inputs of ``--model``). Writes every pair, and the model's
median latency at the minutes when the cores were near (a latency under twice the lowest seen) and far::

    .venv/bin/python bench/cross_core.py ART --model mobilenetv2 --out bench/results/current/cross-core-mobilenetv2.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import provenance
from time_artifacts import example_inputs

PING_PONG = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
static _Atomic long flag __attribute__((aligned(64)));
enum { N = 200000 };
static void pin(int cpu) {
  cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set); pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
static void *pong(void *arg) {
  pin(1);
  for (long i = 0; i < N; i++) {
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1) {}
    atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
  }
  return 0;
}
int main(void) {
  pthread_t other; struct timespec start, end;
  pthread_create(&other, 0, pong, 0); pin(0);
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < N; i++) {
    atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2) {}
  }
  clock_gettime(CLOCK_MONOTONIC, &end); pthread_join(other, 0);
  printf("%.1f\n", ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / N / 2);
  return 0;
}
"""


def build_ping_pong(directory: str) -> str:
    source, binary = os.path.join(directory, "ping_pong.c"), os.path.join(directory, "ping_pong")
    with open(source, "w") as f:
        f.write(PING_PONG)
    subprocess.run(["cc", "-O2", "-pthread", source, "-o", binary], check=True)
    return binary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifact")
    parser.add_argument("--model", required=True, help="zoo name or the .pt2/.onnx file the artifact was tuned from")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=200)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import tvm

    from tunewise import compile as compiler

    compiled = compiler.load(args.artifact)
    arrays = [tvm.runtime.tensor(x, compiled.device) for x in example_inputs(args.model, args.seed)]
    call = compiled.vm["main"]
    for _ in range(10):
        call(*arrays)
    pairs = []
    with tempfile.TemporaryDirectory() as directory:
        ping_pong = build_ping_pong(directory)
        start = time.time()
        while time.time() - start < args.seconds:
            nanoseconds = float(subprocess.run([ping_pong], capture_output=True, text=True, check=True).stdout)
            seconds = []
            for _ in range(args.calls):
                begin = time.perf_counter()
                call(*arrays)
                seconds.append(time.perf_counter() - begin)
            pairs.append({"at_s": time.time() - start, "cross_core_ns": nanoseconds,
                          "model_ms": 1e3 * statistics.median(seconds)})
    near = 2 * min(p["cross_core_ns"] for p in pairs)
    summary = {}
    for name, chosen in (("near", [p for p in pairs if p["cross_core_ns"] < near]),
                         ("far", [p for p in pairs if p["cross_core_ns"] >= near])):
        if chosen:
            summary[name] = {"pairs": len(chosen),
                             "cross_core_ns": statistics.median(p["cross_core_ns"] for p in chosen),
                             "model_ms": statistics.median(p["model_ms"] for p in chosen)}
    result = {"artifact": args.artifact, "model": args.model, "summary": summary, "pairs": pairs}
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    print(summary)


if __name__ == "__main__":
    main()
