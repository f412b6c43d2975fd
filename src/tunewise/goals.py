"""Latency goals: the model latency a run tunes to, absolute or relative to a runtime the user already has.

``"12ms"`` (or ``"0.012s"``, ``"800us"``) is absolute; ``"0.9x-ort"`` is 0.9 times the model's onnxruntime
latency and ``"0.8x-eager"`` 0.8 times its PyTorch eager latency, both timed at the start of the run in a
fresh process (:func:`tunewise.delivery.timing.time_references`).

>>> Goal.parse("12ms").resolve()
0.012
>>> round(Goal.parse("0.9x-ort").resolve(onnxruntime=0.010), 6)
0.009
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tunewise.errors import InputError

_ABSOLUTE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e-?\d+)?)\s*(s|ms|us)\s*$")
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*x-(ort|eager)\s*$")
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
REFERENCES = {"ort": "onnxruntime", "eager": "PyTorch eager"}


@dataclass(frozen=True)
class Goal:
    """A latency goal: ``seconds`` when absolute, else ``factor`` times the latency of ``reference``
    (``"ort"`` or ``"eager"``)."""

    text: str
    seconds: float | None = None
    factor: float | None = None
    reference: str | None = None

    @classmethod
    def parse(cls, text: str) -> Goal:
        """The goal ``text`` states; :class:`~tunewise.errors.InputError` (one line) when it states none."""
        absolute, relative = _ABSOLUTE.match(str(text)), _RELATIVE.match(str(text))
        if absolute:
            seconds = float(absolute.group(1)) * _UNITS[absolute.group(2)]
            if seconds > 0 and math.isfinite(seconds):
                return cls(str(text), seconds=seconds)
        elif relative and float(relative.group(1)) > 0:
            return cls(str(text), factor=float(relative.group(1)), reference=relative.group(2))
        raise InputError(f"bad latency goal {text!r}: expected a positive latency like 12ms, or a multiple of a "
                         "reference like 0.9x-ort or 0.8x-eager")

    def __str__(self) -> str:
        return self.text

    @property
    def relative(self) -> bool:
        return self.reference is not None

    def resolve(self, *, eager: float | None = None, onnxruntime: float | None = None) -> float:
        """The goal in seconds, given the references' latencies (seconds; ``None``: could not be timed)."""
        if not self.relative:
            return self.seconds
        latency = onnxruntime if self.reference == "ort" else eager
        if latency is None:
            raise InputError(f"latency goal {self.text} needs the model's {REFERENCES[self.reference]} latency, "
                             "and it could not be timed; give an absolute goal like 12ms")
        return self.factor * latency
