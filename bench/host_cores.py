"""How far apart the machine's two first CPUs are: the one-way latency of a cache line passed between them.

On a 2-core virtual machine the two virtual CPUs can sit on cores that share a last-level cache (a line
crosses in tens of nanoseconds) or on cores that do not (well over a hundred), and the hypervisor moves them
while a benchmark runs (bench/studies/estimate/findings.md "MobileNetV2 on `znver4`"). A model whose kernels hand
activations from one thread to the other runs up to 1.45x slower while the cores are far, so whole-model timings taken
minutes apart are compared within one state. :class:`Probe` builds a small C program with ``cc`` (a thread pinned to
CPU 0 and one pinned to CPU 1 passing a counter back and forth, 200,000 round trips) and runs it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile

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


class Probe:
    """The ping-pong program, built on entering (``with Probe() as probe``), removed on leaving."""

    def __enter__(self) -> Probe:
        self._directory = tempfile.TemporaryDirectory(prefix="host-cores-")
        source = os.path.join(self._directory.name, "ping_pong.c")
        self._binary = os.path.join(self._directory.name, "ping_pong")
        with open(source, "w") as f:
            f.write(PING_PONG)
        subprocess.run(["cc", "-O2", "-pthread", source, "-o", self._binary], check=True)
        return self

    def __exit__(self, *exc) -> None:
        self._directory.cleanup()

    def one_way_ns(self) -> float:
        """Nanoseconds a cache line takes from CPU 0 to CPU 1, now (a few milliseconds of probing)."""
        return float(subprocess.run([self._binary], capture_output=True, text=True, check=True).stdout)


def is_near(nanoseconds: float, lowest: float) -> bool:
    """Whether a probe's latency says the cores shared a cache: under twice the lowest latency seen."""
    return nanoseconds < 2 * lowest
