"""Many models tuned at once across machines, on Ray: :func:`tune_many`.

Every model is its own run in one shared store (PostgreSQL; SQLite on a single machine). The fleet tunes in
rounds: before each, a population policy (:mod:`tunewise.populations`, Trimmer's suspension by default)
chooses the models that tune in it, one per measurement slot of the cluster (:data:`MEASURE`: one per node,
so a measurement never shares a node with another measurement or with builds); the others are suspended.
A round resumes its run from the store on whatever node Ray places it, and commits every slot before the
next, so a worker that dies loses at most the slot it was measuring.
"""

from tunewise.cluster._connect import LOCAL, MEASURE, connect
from tunewise.cluster._driver import DEFAULT_ROUND, FleetResult, tune_many
from tunewise.cluster._rounds import RoundOutcome

__all__ = ["DEFAULT_ROUND", "LOCAL", "MEASURE", "FleetResult", "RoundOutcome", "connect", "tune_many"]
