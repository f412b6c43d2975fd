"""The candidate-runner contract: where and how a built candidate is loaded, run and timed."""

from __future__ import annotations

import abc


class CandidateRunner(abc.ABC):
    """Runs built candidates on the target's device and times them; the :class:`~tunewise.tuning.measure.Measurer`
    holds one for a run and calls nothing else to reach the device.

    Contract:

    - Built by :func:`tunewise.candidate_runners.create` with keyword-only ``target``, ``config``
      (:class:`~tunewise.tuning.measure.MeasureConfig`) and the runner's own arguments; it may start workers.
    - :meth:`run` is called from the tuning thread, one candidate at a time, and returns once it is timed. It
      reads the shared library at ``artifact`` and leaves it in place, allocates ``args_info`` with
      :func:`tunewise.candidate_runners.alloc_arguments`, and calls the picklable ``evaluator`` where the
      candidate is loaded, as MetaSchedule's ``f_run_evaluator``; what that returns is the ``run_secs``.
    - It returns MetaSchedule's ``RunnerResult``: ``run_secs`` on success, else ``error_msg`` (containing
      ``Timeout`` past ``config.run_timeout``). A failing candidate is a result; an exception means the runner is
      broken, and it ends the run (the slot in flight is not recorded).
    - :meth:`close` is called once, when the measurer closes; the runner is not used after it.
    """

    @abc.abstractmethod
    def run(self, artifact: str, args_info, evaluator):
        """The ``RunnerResult`` of the candidate built at ``artifact`` (see the class contract)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the runner's workers or connections."""
