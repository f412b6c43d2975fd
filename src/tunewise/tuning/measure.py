"""Building and measuring candidates: a persistent builder pool and a candidate runner.

The stock ``LocalBuilder`` starts a fresh process pool for every batch, whose workers each import all tensor
intrinsics, slowly enough that builds time out. :class:`BuilderPool` borrows its workers
(:mod:`tunewise.tuning.workers`) for the run, started once per process; they import TVM and nothing else, and
build with :func:`tunewise.tuning.build.build_candidate`. Candidates are measured one by one by a candidate
runner (:mod:`tunewise.candidate_runners`; by default a persistent worker process on this machine), so each
trial gets its own run seconds, timed by an evaluator (:mod:`tunewise.evaluators`) that is told the task's
best latency so far before every candidate.

With ``overlap=True`` a candidate is measured as soon as it is built while the rest of the batch builds; it is
off by default, since measuring beside the builds distorts the latencies (evidence:
bench/studies/pipeline/findings.md).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

from tunewise import candidate_runners, evaluators
from tunewise.errors import message_line
from tunewise.job import interrupts
from tunewise.target import usable_cores
from tunewise.tuning import tvm_env
from tunewise.tuning.build import build_candidate, export_candidate

BUILD_ERROR, RUN_ERROR, TIMEOUT = "build", "run", "timeout"


_COLD_ENOUGH = 0.01  # seconds: a call at least this long is timed without a warm-up call


def time_once(rt_mod, device, evaluator_config, repeated_args) -> list[float]:
    """A runner evaluator (runs in its worker) that times one call of the candidate: the first, cold call
    when it lasts at least 10 ms (a warm-up call would double the time the slowest default schedules take to
    measure, for a negligible difference), else one call after TVM's untimed warm-up call.
    """
    device.sync()
    start = time.perf_counter()
    rt_mod[rt_mod.entry_name](*repeated_args[0])
    device.sync()
    seconds = time.perf_counter() - start
    if seconds >= _COLD_ENOUGH:
        return [seconds]
    return list(rt_mod.time_evaluator(rt_mod.entry_name, device, number=1, repeat=1)(*repeated_args[0]).results)


@dataclass(frozen=True)
class MeasureConfig:
    """How candidates are measured (MetaSchedule's ``EvaluatorConfig`` plus time limits)."""

    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 100
    enable_cpu_cache_flush: bool = False
    build_timeout: float = 30.0
    run_timeout: float = 30.0
    builder_workers: int = 0  # 0: one per core
    overlap: bool = False

    def evaluator(self):
        from tvm.s_tir.meta_schedule.runner import EvaluatorConfig

        return EvaluatorConfig(number=self.number, repeat=self.repeat, min_repeat_ms=self.min_repeat_ms,
                               enable_cpu_cache_flush=self.enable_cpu_cache_flush)


@dataclass(frozen=True)
class Measurement:
    """One candidate's outcome. ``run_secs`` is empty when ``error`` (build, run or timeout) is set."""

    run_secs: tuple[float, ...]
    error: str | None = None
    message: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0

    @property
    def latency(self) -> float:
        """Mean of the measured repeats (what MetaSchedule's database ranks by); ``inf`` on failure."""
        return sum(self.run_secs) / len(self.run_secs) if self.run_secs else float("inf")


def _build(mod, target, scratch: str) -> tuple[str, float]:

    start = time.perf_counter()
    path = export_candidate(build_candidate(mod, target), scratch)
    return path, time.perf_counter() - start


class BuilderPool:
    """Build worker processes (:func:`tunewise.tuning.workers.borrow`) used for every batch of the run, a time limit
    per build, and given back to the process when the run closes it. New workers start at once, in the
    background, so the first batch finds them ready.
    """

    def __init__(self, workers: int = 0, timeout: float = 30.0, scratch: str | None = None):
        from tunewise.tuning import workers as worker_pools

        self.workers = workers or usable_cores()
        self.scratch = scratch
        self._pool = worker_pools.borrow(self.workers, timeout=timeout)

    def submit(self, mod, target) -> cf.Future:
        return self._pool.submit(_build, mod, target, self.scratch)

    def close(self) -> None:
        from tunewise.tuning import workers

        workers.give_back(self._pool)


class Measurer:
    """Builds and measures batches of candidates for one target; owns the builder pool and the runner.

    ``evaluator`` is a :mod:`tunewise.evaluators` name or instance (default :data:`tunewise.evaluators.DEFAULT`);
    ``runner`` a :mod:`tunewise.candidate_runners` name, built for ``target`` and ``config``, or an instance
    (default :data:`tunewise.candidate_runners.DEFAULT`), closed with the measurer.
    """

    def __init__(self, target, config: MeasureConfig | None = None, *, scratch: str | None = None,
                 evaluator: str | evaluators.Evaluator = evaluators.DEFAULT,
                 runner: str | candidate_runners.CandidateRunner = candidate_runners.DEFAULT):
        self.target = target
        tvm_env.use_target_threads(target)  # before the runner starts its worker
        self.config = config or MeasureConfig()
        self.evaluator = evaluators.create(evaluator)
        self.runner = (runner if isinstance(runner, candidate_runners.CandidateRunner)
                       else candidate_runners.create(runner, target=target, config=self.config))
        self.builder = BuilderPool(self.config.builder_workers, self.config.build_timeout, scratch)

    def _collect_build(self, future: cf.Future) -> tuple[str | None, float, str | None, str]:
        """``(artifact path, build seconds, error kind, message)``; the path is ``None`` when the build failed."""
        try:
            path, seconds = future.result()
            return path, seconds, None, ""
        except TimeoutError:
            return None, self.config.build_timeout, TIMEOUT, ""
        except Exception as err:  # a TVM build error of this candidate
            return None, 0.0, BUILD_ERROR, message_line(err, last=True)

    def _run(self, path: str, args_info, build_seconds: float, reference: float, once: bool = False) -> Measurement:
        start = time.perf_counter()
        result = self.runner.run(path, args_info, time_once if once else self.evaluator.with_reference(reference))
        run_seconds = time.perf_counter() - start
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        if result.error_msg:
            kind = TIMEOUT if "Timeout" in result.error_msg else RUN_ERROR
            return Measurement((), kind, message_line(result.error_msg, last=True)[:500],
                               build_seconds, run_seconds)
        return Measurement(tuple(float(s) for s in result.run_secs), None, "", build_seconds, run_seconds)

    def measure(self, batch, *, reference: float | None = None, once: bool = False,
                on_phase: Callable[[str], None] | None = None) -> list[Measurement]:
        """Build and measure ``batch``, a list of ``(mod, args_info)``; one :class:`Measurement` each, in order.

        ``reference`` says the batch holds candidates of one task whose best latency so far is ``reference``
        (``inf``: none yet); it is lowered by every candidate of the batch that beats it, and the evaluator
        is told it before each candidate (the adaptive one stops clearly slower candidates early). ``None``
        (candidates of different tasks, or default schedules) tells the evaluator no reference at all.

        With ``once`` each candidate is timed by one call (:func:`time_once`), whatever the configuration says:
        enough to rank default schedules and estimate the untuned model, whose slowest tasks would otherwise
        run for seconds each.

        ``on_phase`` is called with ``"build"`` before the builds and ``"measure"`` before the first run.

        A stop at once (:func:`tunewise.job.interrupts.raise_if_stopped`) ends the batch at its next candidate.
        """
        if on_phase is not None:
            on_phase("build")
        futures = [self.builder.submit(mod, self.target) for mod, _ in batch]
        results: list[Measurement | None] = [None] * len(batch)
        pending = []

        def run(i: int, path: str, seconds: float, args_info) -> None:
            nonlocal reference, on_phase
            if on_phase is not None:
                on_phase("measure")
                on_phase = None
            results[i] = self._run(path, args_info, seconds, math.inf if reference is None else reference, once)
            if reference is not None:
                reference = min(reference, results[i].latency)

        for i, (future, (_, args_info)) in enumerate(zip(futures, batch, strict=True)):
            interrupts.raise_if_stopped(at_once=True)
            path, seconds, kind, message = self._collect_build(future)
            if path is None:
                results[i] = Measurement((), kind, message[:500], seconds)
            elif self.config.overlap:
                run(i, path, seconds, args_info)
            else:
                pending.append((i, path, seconds, args_info))
        for item in pending:
            interrupts.raise_if_stopped(at_once=True)
            run(*item)
        return results

    def close(self) -> None:
        self.builder.close()
        self.runner.close()
