"""What a Ray worker does for a fleet: tune one model's run for a round, and compile the tuned model at the
end. Both resume the run from the shared store, so a round lost with its worker loses at most the slot it
was measuring, and the next attempt continues from the store. Both import TVM without PyTorch first, as the
tunewise program does (:func:`tunewise.tuning.tvm_env.import_tvm`; a Ray worker is a fresh interpreter): PyTorch is
imported only where a model not in the import cache needs it."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from dataclasses import dataclass

from tunewise import stores
from tunewise.errors import RunBusyError
from tunewise.job import prepare
from tunewise.job.lease import Lease
from tunewise.settings import RunSettings
from tunewise.tuning import tvm_env

_LOADED: dict = {}  # (source, settings) -> (model, measurer, goal): a worker keeps what it imported


@dataclass(frozen=True)
class RoundOutcome:
    """What a round did to a run: its tuning seconds and trials so far, the untuned estimate and the model's
    latency now (the latest measured one, else the estimate), and whether the run is ``finished`` (by its own
    limits or stop rules, or because nothing more fits them), with the stop rule's reason if one ended it."""

    run: int
    elapsed: float
    trials: int
    untuned: float
    latency: float
    finished: bool
    stopped_by: str | None = None


def tune_round(source: str, settings: dict, store_url: str, run: int | None, seconds: float) -> RoundOutcome:
    """Tune ``source`` as ``settings`` (a :class:`~tunewise.settings.RunSettings` JSON object) say, recording to
    run ``run`` of the store at ``store_url`` (``None``: a new run), for ``seconds`` of this round."""
    tvm_env.import_tvm()
    settings = RunSettings.from_json(settings)
    model, measurer, goal = _load(source, settings)
    store = stores.create(store_url)
    with contextlib.closing(store), Lease() as lease:
        if run is not None:
            _claim(lease, store, run)
        first = start = None

        def deadline(snapshot) -> float:
            """No limit before the round's first slot (a slot needing a search would not fit a short round, and
            a round that measures nothing would leave its run for finished); no slot after ``seconds``."""
            nonlocal first, start
            if first is None:
                first, start = snapshot.slot, time.perf_counter()
            return math.inf if snapshot.slot == first else start + seconds

        session = prepare.open_session(model, settings, store=store, measurer=measurer, run=run, lease=lease,
                                       deadline=deadline, resolved=prepare.Resolved(goal=goal))
        before = session.ledger.trials
        snapshot = session.run()
    ledger = session.ledger
    finished = ledger.spent() or snapshot.trials == before  # a round that measured nothing ends its run too
    latency = snapshot.measured[-1][1] if snapshot.measured else snapshot.estimated_latency()
    return RoundOutcome(run=session.run_id, elapsed=snapshot.elapsed, trials=snapshot.trials,
                        untuned=snapshot.untuned_latency(), latency=latency, finished=finished,
                        stopped_by=ledger.stopped_by)


def new_run(model: str, settings: dict, store_url: str) -> int:
    """A new run of ``model`` (its name) in the store at ``store_url``, ``suspended`` until a round claims it,
    for this node's target, stored with ``settings`` (a :class:`~tunewise.settings.RunSettings` JSON object) as
    :func:`tunewise.job.prepare.open_session` stores a run's (the graph level and energy meter resolved here)."""
    tvm_env.import_tvm()
    from tunewise import energy
    from tunewise import target as targets
    from tunewise.lowering import graph

    settings = RunSettings.from_json(settings)
    target = targets.resolve(None)
    stored = dataclasses.replace(settings, level=settings.level or graph.default_level(target),
                                 energy_meter=energy.for_device(settings.energy_meter, targets.is_gpu(target)).name)
    with contextlib.closing(stores.create(store_url)) as store:
        return store.create_run(model, str(target), settings.scheduler, stored.to_json(), status=stores.SUSPENDED)


def finish(run: int, store_url: str):
    """Compile run ``run`` with its best records, verify and time it as its settings say, and write its artifact
    to its folder: :func:`tunewise.job.workflow.resume` with no trial left to measure."""
    from tunewise.job import workflow

    tvm_env.import_tvm()
    with contextlib.closing(stores.create(store_url)) as store:
        trials = len(store.get_trials(run, records=False))
    return workflow.resume(run, store=store_url, budget={"max_trials": max(trials, 1)}, progress=False)


def _load(source: str, settings: RunSettings):
    # every setting but the artifact folder, which differs between the models of a fleet and loads nothing
    key = (source, json.dumps(dataclasses.replace(settings, output=None).to_json(), sort_keys=True))
    if key not in _LOADED:
        from tunewise import target as targets

        target = targets.resolve(None)
        measurer = prepare.make_measurer(target, settings)
        model = prepare.load_model(source, settings, target=target)
        goal = prepare.resolve_goal(settings, source, model.inputs)
        _LOADED[key] = (model, measurer, goal)
    return _LOADED[key]


def _claim(lease: Lease, store, run: int) -> None:
    """Claim ``run``, waiting for a dead owner's heartbeat to go stale (a round retried on another node after
    its worker died)."""
    deadline = time.monotonic() + stores.HEARTBEAT_STALE + 2 * stores.HEARTBEAT_INTERVAL
    while True:
        try:
            lease.claim(store, run)
            return
        except RunBusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(stores.HEARTBEAT_INTERVAL / 2)

