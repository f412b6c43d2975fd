"""The contract of a population policy, and the frozen view of a model it decides from."""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelView:
    """One model of a fleet as a population policy sees it, frozen.

    ``history`` holds ``(cost, latency)`` points in cost order: the model's latency (seconds: measured, or the
    run's estimate) at the start and after every round it tuned in, against what its tuning had cost by then
    (seconds of tuning time, or joules: one unit for the whole fleet). ``finished`` models have reached their
    goal, spent their budget or have nothing left to tune; ``suspended`` ones were left out of the last round.
    """

    name: str
    history: tuple[tuple[float, float], ...] = ()
    finished: bool = False
    suspended: bool = False

    @property
    def cost(self) -> float:
        """What the model's tuning has cost so far."""
        return self.history[-1][0] if self.history else 0.0

    @property
    def rate(self) -> float:
        """The model's latest payoff: the relative latency gain of its last round per unit of cost,
        ``(before - after) / before / cost of the round``; ``inf`` before it has tuned a round (a model not
        yet tried is taken to pay off), 0 when its last round cost nothing."""
        if len(self.history) < 2:
            return math.inf
        (c0, l0), (c1, l1) = self.history[-2:]
        if c1 <= c0 or not math.isfinite(l0):
            return 0.0 if c1 <= c0 else math.inf
        return (l0 - l1) / l0 / (c1 - c0)


@dataclass(frozen=True)
class Round:
    """What the next round does: the models that tune in it (``run``), the running ones it leaves out
    (``suspend``) and the suspended ones it brings back (``resume``), as indices into the fleet."""

    run: tuple[int, ...]
    suspend: tuple[int, ...] = ()
    resume: tuple[int, ...] = ()


class PopulationPolicy(abc.ABC):
    """Decides, before every round of a fleet's tuning, which of its models tune in that round.

    Contract:

    - A fleet driver (the cluster's, or the simulator :func:`tunewise.lab.fleet.simulate`) calls :meth:`plan`
      before each round with one frozen :class:`ModelView` per model, in a fixed order, and the number of
      models that can tune at once (``capacity``: the fleet's measurement slots). It runs the returned
      :attr:`Round.run` models for one round, suspends the others and records both; a model's run is resumed
      from the store when it is chosen again, so suspending loses nothing.
    - :meth:`select` returns at most ``capacity`` distinct indices of unfinished models (checked by
      :meth:`plan`, which raises ``RuntimeError`` otherwise); it returns none only when every model is
      finished. It never touches runs, workers or the store, and may keep no state but what it was shown,
      so a policy is replayable from the recorded rounds.
    - Constructors take keyword-only arguments, stored unchanged, and raise ``ValueError`` on bad values.
    """

    @abc.abstractmethod
    def select(self, models: Sequence[ModelView], capacity: int) -> tuple[int, ...]:
        """The indices of the models that tune in the next round."""

    def plan(self, models: Sequence[ModelView], capacity: int) -> Round:
        """The next :class:`Round`: :meth:`select`'s choice, checked, with the suspensions and resumptions
        it means (a model is running when it has tuned and is neither suspended nor finished)."""
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        run = tuple(self.select(models, capacity))
        unfinished = [i for i, m in enumerate(models) if not m.finished]
        if len(set(run)) != len(run) or len(run) > capacity or any(models[i].finished for i in run) or (
                unfinished and not run):
            raise RuntimeError(f"{self!r} chose {run} from {len(unfinished)} unfinished models at capacity "
                               f"{capacity}")
        chosen = set(run)
        suspend = tuple(i for i in unfinished if i not in chosen and not models[i].suspended
                        and len(models[i].history) > 1)
        resume = tuple(i for i in run if models[i].suspended)
        return Round(run, suspend, resume)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"
