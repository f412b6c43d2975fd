"""The candidate-filter contract."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    """A measured candidate as a filter learns from it: its task's ``workload`` (store id), its tuning record's
    JSON text (MetaSchedule's, trace first) and its ``latency`` in seconds (``inf``: it failed)."""

    workload: int
    record: str
    latency: float


class CandidateFilter(abc.ABC):
    """Decides, before they are measured, which proposed candidates to skip.

    Contract:

    - :meth:`tell` gives the filter every measured candidate of the run, in measurement order (on resume,
      those the store holds first). :meth:`skip` says, for candidates of one workload proposed for the next
      slot (their records' JSON text, without run seconds), which to skip. Both work on JSON text alone: a
      filter never builds, measures or records, and needs no TVM.
    - A filter may skip nothing (too little data); it never skips every candidate of a batch because of
      candidates it has not been told.
    - Every random choice comes from the filter's own generator, seeded by its ``seed``.
    - Constructors take keyword-only arguments and raise ``ValueError`` on bad values.
    """

    @abc.abstractmethod
    def tell(self, measured: Sequence[Measured]) -> None:
        """Candidates measured since the last call, in measurement order."""

    @abc.abstractmethod
    def skip(self, workload: int, records: Sequence[str]) -> list[bool]:
        """For each proposed candidate of ``workload`` (its record's JSON text), whether to skip it."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"
