"""The evaluator contract: how one built candidate is timed inside MetaSchedule's runner worker."""

from __future__ import annotations

import abc


class Evaluator(abc.ABC):
    """Times one candidate; MetaSchedule's ``LocalRunner`` calls it as its ``f_run_evaluator``.

    Contract:

    - It is called in the runner's worker process, once per candidate, as
      ``evaluator(rt_mod, device, evaluator_config, repeated_args) -> list[float]``: ``rt_mod`` is the loaded
      candidate, ``evaluator_config`` MetaSchedule's ``EvaluatorConfig`` built from
      :class:`~tunewise.tuning.measure.MeasureConfig`, ``repeated_args`` one or more argument lists to run it on.
    - The returned list holds latencies in seconds. Its **mean is the candidate's latency estimate** (what
      MetaSchedule's database ranks by and :attr:`tunewise.tuning.measure.Measurement.latency` reports) and its
      **length the number of timed samples** the evaluator took; each evaluator documents what one sample is.
    - The evaluator is pickled into the worker with every candidate, so it is a small frozen value of a
      class importable at module level, and its behaviour depends only on its fields and its arguments.
    - :meth:`with_reference` gives the evaluator to use for a candidate of a task whose best latency so far
      is ``latency`` (``math.inf`` while the task has none); an evaluator that has no use for it returns
      itself. The :class:`~tunewise.tuning.measure.Measurer` calls it before every candidate.
    - Constructors take keyword-only arguments, stored unchanged, and raise ``ValueError`` on bad values.
    """

    @abc.abstractmethod
    def __call__(self, rt_mod, device, evaluator_config, repeated_args) -> list[float]:
        """Latencies of the candidate in seconds (see the class contract for what they mean)."""

    def with_reference(self, latency: float) -> Evaluator:
        """This evaluator for a task whose best latency so far is ``latency``; itself by default."""
        return self
