"""Stop rules: when the whole run is over.

Every rule follows the contract of :class:`StopRule`; :func:`create` builds one from its name. The
:class:`~tunewise.tuning.ledger.Ledger` takes a list of them (``stoppers=[...]``) and asks them before every slot,
so they end a real session and a :func:`~tunewise.lab.replay.replay` alike, whatever the scheduler.

>>> rule = create("goal", latency=0.012)
>>> create(rule) is rule
True
"""

from __future__ import annotations

from tunewise import _factory
from tunewise.stoppers._base import StopRule
from tunewise.stoppers._budget import CostBudget
from tunewise.stoppers._diminishing import DiminishingReturns
from tunewise.stoppers._give_up import GiveUp
from tunewise.stoppers._goal import LatencyGoal

__all__ = ["CostBudget", "DiminishingReturns", "GiveUp", "LatencyGoal", "StopRule", "create", "names"]

_REGISTRY: dict[str, type[StopRule]] = {
    "goal": LatencyGoal,
    "budget": CostBudget,
    "diminishing": DiminishingReturns,
    "give-up": GiveUp,
}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return list(_REGISTRY)


def create(name: str | StopRule, **kwargs: object) -> StopRule:
    """The stop rule called ``name``, built with ``kwargs``; an instance is returned unchanged.

    Raises :class:`~tunewise.errors.InputError` on an unknown name, an argument the rule does not take (the
    message lists the valid ones), or a bad value.
    """
    registry = {key: (lambda cls=cls: cls) for key, cls in _REGISTRY.items()}
    return _factory.create("stop rule", registry, name, kwargs, StopRule)
