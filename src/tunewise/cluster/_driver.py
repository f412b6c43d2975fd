"""Many models tuned at once on a Ray cluster: each model its own run in one shared store, tuned in rounds,
the rounds' models chosen by a population policy (:mod:`tunewise.populations`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tunewise import populations, stores, zoo
from tunewise.cluster._connect import MEASURE, connect, is_local
from tunewise.cluster._rounds import RoundOutcome, finish, tune_round
from tunewise.errors import InputError, TunewiseError
from tunewise.populations import ModelView, Round
from tunewise.settings import RunSettings

DEFAULT_ROUND = 120.0
"""Seconds of tuning a model gets in a round before the policy decides again."""


@dataclass(frozen=True)
class FleetResult:
    """What :func:`tune_many` did: per model (in the order given), its run in the store and its
    :class:`~tunewise.workflow.TuneResult` (``None`` for a model that never tuned); the rounds, and how often
    the policy suspended and resumed a model."""

    runs: tuple[int | None, ...]
    results: tuple
    rounds: int
    suspensions: int
    resumptions: int


def tune_many(sources: Sequence[str], *, cluster: str = "local", store: str | None = None,
              policy: str | populations.PopulationPolicy = "suspension", round_seconds: float = DEFAULT_ROUND,
              settings: RunSettings | None = None, output: str | None = None, compare_torch: bool = True,
              on_round: Callable[[int, Round, Sequence[str], dict[int, RoundOutcome]], None] | None = None
              ) -> FleetResult:
    """Tune every model of ``sources`` (zoo names, ``.onnx``/``.pt2`` paths: the same path on every node) on
    ``cluster`` (:func:`tunewise.cluster.connect`), each as its own run of ``store`` (a URL reachable from
    every node: PostgreSQL; SQLite only for the ``local`` cluster), with ``settings`` (their budget and stop
    rules apply to each model; their source is each model's), and write one artifact per model, under
    ``output/MODEL`` (default ``tunewise-out/MODEL``; models of one name are numbered, ``MODEL-2``), with
    PyTorch eager and onnxruntime timed beside each unless ``compare_torch`` is false.

    Before every round, ``policy`` chooses as many models as the cluster has measurement slots; each tunes
    ``round_seconds`` on a node of its own (the Ray resource :data:`~tunewise.cluster.MEASURE`), the others
    wait as ``suspended`` runs. A model is done when its run's limits or stop rules end it. ``on_round(index,
    plan, names, outcomes)`` is told every round. A round whose worker dies is retried by Ray, and its run
    resumed from the store: at most the slot in flight is lost, and no candidate is measured twice.
    """
    import ray

    settings = settings or RunSettings()
    if not sources:
        raise InputError("name at least one model to tune")
    if not settings.budget.bounded:
        raise InputError("give each model a budget: trials or tuning time")
    url = _store_url(store, cluster)
    keeper = stores.create(url)  # opened before Ray starts, so that a bad URL is one line before anything runs
    policy = populations.create(policy)
    sources = [s if s in zoo.MODELS or not os.path.exists(s) else os.path.abspath(s) for s in sources]
    names = _names(sources)
    folder = os.path.abspath(output or "tunewise-out")  # as the workers must see it, wherever they run
    model_settings = [dataclasses.replace(settings, source=s, output=os.path.join(folder, name))
                      for s, name in zip(sources, names, strict=True)]
    slots = connect(cluster)
    runs: list[int | None] = [None] * len(sources)
    history: list[list[tuple[float, float]]] = [[] for _ in sources]
    finished, suspended = [False] * len(sources), [False] * len(sources)
    remote_round = ray.remote(tune_round).options(resources={MEASURE: 1}, max_retries=3)
    rounds = suspensions = resumptions = 0
    while True:
        views = [ModelView(name, tuple(h), f, s)
                 for name, h, f, s in zip(names, history, finished, suspended, strict=True)]
        plan = policy.plan(views, slots)
        if not plan.run:
            break
        for i in plan.suspend:
            suspended[i] = True
            keeper.set_status(runs[i], stores.SUSPENDED)
        suspensions, resumptions = suspensions + len(plan.suspend), resumptions + len(plan.resume)
        refs = {i: remote_round.remote(sources[i], model_settings[i].to_json(), url, runs[i], round_seconds)
                for i in plan.run}
        outcomes = dict(zip(refs, _get(list(refs.values())), strict=True))
        for i, outcome in outcomes.items():
            suspended[i], runs[i], finished[i] = False, outcome.run, outcome.finished
            if not history[i]:
                history[i].append((0.0, outcome.untuned))
            history[i].append((outcome.elapsed, outcome.latency))
        rounds += 1
        if on_round is not None:
            on_round(rounds, plan, names, outcomes)
    keeper.close()
    remote_finish = ray.remote(finish).options(resources={MEASURE: 1}, max_retries=3)
    refs = [None if run is None else remote_finish.remote(run, url, s.output, compare_torch)
            for run, s in zip(runs, model_settings, strict=True)]
    results = tuple(None if ref is None else _get([ref])[0] for ref in refs)
    return FleetResult(tuple(runs), results, rounds, suspensions, resumptions)


def _get(refs: list) -> list:
    """The results of the Ray tasks ``refs``; a user error raised in a task is raised here as it is, and a
    stop (Ctrl-C) cancels the tasks, whose runs keep every slot they recorded."""
    import ray

    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as err:
        if isinstance(err.cause, TunewiseError):
            raise err.cause from None
        raise
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise


def _store_url(store: str | None, cluster: str) -> str:
    """The store's URL as every worker must see it: SQLite only on the local cluster, its path absolute."""
    url = store or stores.DEFAULT_URL
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if not path or path == ":memory:":
            raise InputError("the models of a fleet share a store their workers open: give a file or a server, "
                             "not an in-memory SQLite store")
        if not is_local(cluster):
            raise InputError(f"a cluster of several machines needs a store they all reach, such as "
                             f"postgresql+psycopg://user@host/db; SQLite ({url}) serves --cluster local only")
        url = "sqlite:///" + os.path.abspath(path)
    return url


def _names(sources: Sequence[str]) -> list[str]:
    """A distinct name per model: the zoo name or the file's name without its suffix, numbered when repeated."""
    names: list[str] = []
    for source in sources:
        base = source if source in zoo.MODELS else os.path.splitext(os.path.basename(source))[0]
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}-{n}"
        names.append(name)
    return names
