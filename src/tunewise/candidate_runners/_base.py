"""The candidate-runner contract: where and how a built candidate is loaded, run and timed."""

from __future__ import annotations

import abc


class CandidateRunner(abc.ABC):
    """Runs built candidates on the target's device and times them; the :class:`~tunewise.tuning.measure.Measurer`
    holds one for a run and calls nothing else to reach the device.

    Contract:

    - Built by :func:`tunewise.candidate_runners.create` with the keyword-only arguments ``target`` (the TVM
      target the candidates are built for) and ``config`` (:class:`~tunewise.tuning.measure.MeasureConfig`: the
      evaluator settings and ``run_timeout``), plus the runner's own keyword-only arguments (a tracker address,
      a device key); the constructor may start worker processes or open connections.
    - :meth:`run` is called from the tuning thread, one candidate at a time, and returns when the candidate is
      timed. ``artifact`` is the path of the candidate's shared library on this machine
      (:func:`tunewise.tuning.build.export_candidate`); the runner reads it and leaves it in place (the measurer
      deletes its folder afterwards); a remote runner uploads it. ``args_info`` is MetaSchedule's description
      of the candidate's arguments, which the runner allocates with :func:`tunewise.candidate_runners.alloc_arguments`
      (random floats, true masks, zero indices).
    - ``evaluator`` (a :class:`tunewise.evaluators.Evaluator`, or a module-level function of the same signature
      such as :func:`tunewise.tuning.measure.time_once`; picklable) is called where the candidate is loaded, as
      MetaSchedule's ``f_run_evaluator(rt_mod, device, evaluator_config, repeated_args)``, and what it
      returns is the candidate's ``run_secs``.
    - :meth:`run` returns MetaSchedule's ``RunnerResult``: ``run_secs`` (seconds, as the evaluator returned
      them) on success, else ``error_msg``, which contains ``Timeout`` when the candidate ran past
      ``config.run_timeout``. A candidate that fails is a result, never an exception; an exception means the
      runner itself is broken, and it ends the run (the slot in flight is not recorded).
    - :meth:`close` is called once, when the measurer closes; the runner is not used after it.
    """

    @abc.abstractmethod
    def run(self, artifact: str, args_info, evaluator):
        """The ``RunnerResult`` of the candidate built at ``artifact`` (see the class contract)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the runner's workers or connections."""
