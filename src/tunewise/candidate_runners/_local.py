"""Candidates run in a worker process on this machine, as MetaSchedule's ``LocalRunner`` runs them."""

from __future__ import annotations

from tunewise.candidate_runners._arguments import alloc_arguments
from tunewise.candidate_runners._base import CandidateRunner


class Local(CandidateRunner):
    """One persistent worker process on this machine (:func:`tunewise.tuning.workers.borrow`), borrowed by the
    runner and given back when it closes: as MetaSchedule's ``LocalRunner`` does, it loads each candidate,
    allocates its arguments and calls the evaluator given with it. The worker ignores Ctrl-C (the tuning
    process decides when to stop) and is replaced when a candidate runs past ``config.run_timeout``, crashes
    it or fails in it: a kernel that fails on a GPU can leave the process's CUDA context unusable for every
    candidate after it.
    """

    def __init__(self, *, target, config):
        import subprocess

        from tunewise.target import device_type
        from tunewise.tuning import workers

        self.target, self.config = target, config
        self._device = device_type(target)
        self._evaluator_config = config.evaluator()
        self._pool = workers.borrow(1, timeout=config.run_timeout, stderr=subprocess.DEVNULL)

    def run(self, artifact: str, args_info, evaluator):
        from tvm.s_tir.meta_schedule.runner import RunnerResult

        job = self._pool.submit(_run, artifact, self._device, tuple(info.as_json() for info in args_info), evaluator,
                                self._evaluator_config)
        try:
            return RunnerResult(job.result(), None)
        except TimeoutError:
            return RunnerResult(None, f"Timeout: the candidate ran past {self.config.run_timeout:g} s")
        except Exception as err:  # the candidate failed in the worker (the message holds its traceback) or killed it
            self._pool.restart()
            return RunnerResult(None, f"{type(err).__name__}: {err}")

    def close(self) -> None:
        from tunewise.tuning import workers

        workers.give_back(self._pool)


def _run(artifact: str, device_type: str, args_info, evaluator, evaluator_config) -> list[float]:
    """The seconds ``evaluator`` times the candidate built at ``artifact`` (runs in the worker); ``args_info``
    in its JSON form."""
    import tvm

    module = tvm.runtime.load_module(artifact)
    device = tvm.runtime.device(device_type, 0)
    return [float(s) for s in evaluator(module, device, evaluator_config, alloc_arguments(device, args_info, 1))]
