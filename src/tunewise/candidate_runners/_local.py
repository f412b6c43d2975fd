"""Candidates run in a worker process on this machine: MetaSchedule's ``LocalRunner``."""

from __future__ import annotations

from tunewise.candidate_runners._arguments import alloc_arguments
from tunewise.candidate_runners._base import CandidateRunner


class Local(CandidateRunner):
    """One persistent worker process on this machine (MetaSchedule's ``LocalRunner``), started with the
    runner: it loads each candidate, allocates its arguments and calls the evaluator given with it. The worker
    ignores Ctrl-C (the tuning process decides when to stop) and is replaced when a candidate runs past
    ``config.run_timeout`` or crashes it.

    >>> runner = create("local", target=target, config=MeasureConfig())  # doctest: +SKIP
    """

    def __init__(self, *, target, config):
        from tvm.s_tir.meta_schedule.runner import LocalRunner

        from tunewise import interrupts
        from tunewise.target import device_type

        self.target, self.config = target, config
        self._device = device_type(target)
        self._runner = LocalRunner(timeout_sec=config.run_timeout, evaluator_config=config.evaluator(),
                                   f_alloc_argument=alloc_arguments, initializer=interrupts.ignore_in_worker)

    def run(self, artifact: str, args_info, evaluator):
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        self._runner.f_run_evaluator = evaluator  # pickled with this candidate
        return self._runner.run([RunnerInput(artifact, self._device, args_info)])[0].result()

    def close(self) -> None:
        self._runner.pool.shutdown()
