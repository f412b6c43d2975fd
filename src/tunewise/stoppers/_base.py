"""The stop-rule contract."""

from __future__ import annotations

import abc

from tunewise._numbers import is_positive, is_whole
from tunewise.tuning.state import Cost, Snapshot


class StopRule(abc.ABC):
    """Decides whether the whole run is over.

    Contract:

    - The ledger calls :meth:`check` before every slot it hands out (:meth:`tunewise.tuning.ledger.Ledger.ask`),
      once its own budgets allow one more slot and some task is live, with a frozen
      :class:`~tunewise.tuning.state.Snapshot` and the run's :class:`~tunewise.tuning.state.Cost` so far. Rules are
      asked in order; the first that returns a reason ends the run. A slot that has started is never cut short.
    - A rule never builds, measures, records or mutates the snapshot; its private state derives only from what it
      was shown, so one instance serves one run. It decides from the model latency (:meth:`model_latency`) and the
      cost, never from the scheduler's state.
    - :meth:`check` returns ``None`` while the run goes on, else a one-line reason shown to the user. A rule that
      needs a cost the driver does not give (``cost.joules is None``) raises :class:`~tunewise.errors.InputError`.
    - Constructors take keyword-only arguments, stored unchanged, and raise ``ValueError`` on bad values.
    """

    @abc.abstractmethod
    def check(self, snapshot: Snapshot, cost: Cost) -> str | None:
        """``None`` while the run goes on; why it is over, in one line, once it is."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


def positive(name: str, value: object, *, integer: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number > 0 (an ``int`` when ``integer``)."""
    if not is_positive(value) or (integer and not is_whole(value)):
        raise ValueError(f"{name} must be a positive {'integer' if integer else 'number'}, got {value!r}")


def model_latency(snapshot: Snapshot) -> tuple[float, str]:
    """The run's model latency and where it comes from: the latest measured one (``"measured"``) when the
    driver told one, else the snapshot's estimate (``"estimated"``)."""
    if snapshot.measured:
        return snapshot.measured[-1][1], "measured"
    return snapshot.estimated_latency(), "estimated"


def milliseconds(seconds: float) -> str:
    """``seconds`` as milliseconds for a reason text: ``0.0123`` -> ``"12.3 ms"``."""
    return f"{seconds * 1e3:.4g} ms"
