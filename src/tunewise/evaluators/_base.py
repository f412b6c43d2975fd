"""The evaluator contract: how one built candidate is timed inside MetaSchedule's runner worker."""

from __future__ import annotations

import abc


class Evaluator(abc.ABC):
    """Times one candidate; MetaSchedule's ``LocalRunner`` calls it as its ``f_run_evaluator``.

    Contract:

    - It is called in the runner's worker, once per candidate, as ``evaluator(rt_mod, device, evaluator_config,
      repeated_args) -> list[float]``, with MetaSchedule's ``EvaluatorConfig`` built from
      :class:`~tunewise.tuning.measure.MeasureConfig` and one or more argument lists.
    - The list holds latencies in seconds: its **mean is the candidate's latency estimate** (what the database
      ranks by) and its **length the number of timed samples**; each evaluator documents what a sample is.
    - It is pickled into the worker with every candidate: a small frozen value of a module-level class, whose
      behaviour depends only on its fields and arguments.
    - :meth:`with_reference` gives the evaluator for a candidate of a task whose best latency so far is
      ``latency`` (``math.inf`` before one); the measurer calls it before every candidate.
    - Constructors take keyword-only arguments, stored unchanged, and raise ``ValueError`` on bad values.
    """

    @abc.abstractmethod
    def __call__(self, rt_mod, device, evaluator_config, repeated_args) -> list[float]:
        """Latencies of the candidate in seconds (see the class contract for what they mean)."""

    def with_reference(self, latency: float) -> Evaluator:
        """This evaluator for a task whose best latency so far is ``latency``; itself by default."""
        return self
