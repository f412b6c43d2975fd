"""What counts as a number in an argument or a setting: an ``int`` or a ``float``, never a ``bool`` (which
Python counts as an ``int``)."""

from __future__ import annotations

import math


def is_number(value: object) -> bool:
    """Whether ``value`` is an ``int`` or a ``float`` (infinity and NaN included), not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_whole(value: object) -> bool:
    """Whether ``value`` is an ``int``, not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """Whether ``value`` is a finite number (:func:`is_number`)."""
    return is_number(value) and math.isfinite(value)


def is_positive(value: object) -> bool:
    """Whether ``value`` is a finite number above 0."""
    return is_real(value) and value > 0
