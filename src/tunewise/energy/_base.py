"""The energy-meter contract."""

from __future__ import annotations

import abc
from dataclasses import dataclass

from tunewise.errors import InputError


class MeterUnavailable(InputError):
    """The meter cannot be read on this machine: no counter, no permission, or its library is missing."""


@dataclass(frozen=True)
class Reading:
    """Energy used since the meter was made, in ``joules``; ``estimated`` when it is not read from a hardware
    counter."""

    joules: float
    estimated: bool


class EnergyMeter(abc.ABC):
    """Measures the energy a run uses.

    Contract:

    - Constructing a meter takes its starting point; it raises :class:`MeterUnavailable` (one line) when the
      backend cannot be read on this machine, so :func:`tunewise.energy.create` with ``"auto"`` can try the
      next one.
    - :meth:`read` returns the joules used since then: cheap enough to call once per slot, and never lower
      than the reading before it. A meter whose counters wrap must be read at least once per wrap period.
    - :attr:`name` is the backend's name in :func:`tunewise.energy.create`.
    - Not thread-safe; :meth:`close` releases what the backend holds.
    - Constructors take keyword-only arguments, stored unchanged, and raise ``ValueError`` on bad values.
    """

    name: str

    @abc.abstractmethod
    def read(self) -> Reading:
        """Joules used since the meter was made, and whether that is an estimate."""

    def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release what the backend holds (nothing, unless it holds a library)."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"
