"""Many models tuned at once on a Ray cluster: each model its own run in one shared store, tuned in rounds,
the rounds' models chosen by a population policy (:mod:`tunewise.populations`)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tunewise import populations, stores, zoo
from tunewise.cluster._connect import MEASURE, connect, is_local
from tunewise.cluster._rounds import RoundOutcome, finish, new_run, tune_round
from tunewise.errors import ClusterLostError, InputError, TunewiseError, message_line
from tunewise.job.interrupts import Interrupted
from tunewise.populations import ModelView, Round
from tunewise.settings import RunSettings

DEFAULT_ROUND = 120.0
"""Seconds of tuning a model gets in a round before the policy decides again."""
RESTARTS = 3
"""How many times a fleet starts its lost local Ray cluster again."""

_log = logging.getLogger(__name__)


def _lost_cluster_errors() -> tuple[type[BaseException], ...]:
    """The Ray errors that say the cluster lost a process or node a task needed, not that the task failed."""
    import ray.exceptions as errors

    return (errors.LocalRayletDiedError, errors.NodeDiedError, errors.WorkerCrashedError, errors.ObjectLostError,
            errors.RaySystemError, errors.RpcError)


@dataclass(frozen=True)
class FleetResult:
    """What :func:`tune_many` did: per model (in the order given), its run in the store and its
    :class:`~tunewise.job.workflow.TuneResult` (``None`` for a model that never tuned); the rounds, and how often
    the policy suspended and resumed a model."""

    runs: tuple[int, ...]
    results: tuple
    rounds: int
    suspensions: int
    resumptions: int


def tune_many(sources: Sequence[str] = (), *, cluster: str = "local", store: str | None = None,
              policy: str | populations.PopulationPolicy = "suspension", round_seconds: float = DEFAULT_ROUND,
              settings: RunSettings | None = None, output: str | None = None,
              on_round: Callable[[int, Round, Sequence[str], dict[int, RoundOutcome]], None] | None = None,
              resume: Sequence[int] = (), restarts: int = RESTARTS) -> FleetResult:
    """Tune every model of ``sources`` (zoo names, ``.onnx``/``.pt2`` paths, the same on every node) on ``cluster``
    (:func:`tunewise.cluster.connect`), each as its own run of ``store`` (a URL every node reaches: PostgreSQL;
    SQLite only for the ``local`` cluster) with ``settings``, and write one artifact per model under
    ``output/MODEL`` (default ``tunewise-out/MODEL``; ``MODEL-2`` for a repeated name), finished as the settings
    say. ``resume`` continues the runs it names instead, each with its own settings (then ``sources``,
    ``settings`` and ``output`` are not given).

    Before every round, ``policy`` chooses as many models as the cluster has measurement slots (the Ray resource
    :data:`~tunewise.cluster.MEASURE`); each tunes ``round_seconds`` on a node of its own while the others wait
    ``suspended``, and a model is done when its run's limits or stop rules end it. ``on_round(index, plan, names,
    outcomes)`` is told every round. A round whose worker dies is retried by Ray and its run resumed from the
    store (at most the slot in flight is lost). A ``local`` cluster that loses a process it needs is started
    again, at most ``restarts`` times; any other cluster's loss raises :class:`~tunewise.errors.ClusterLostError`
    naming what died and the command that continues the runs.
    """
    import ray

    settings = settings or RunSettings()
    url = _store_url(store, cluster)
    keeper = stores.create(url)  # opened before Ray starts, so that a bad URL is one line before anything runs
    policy = populations.create(policy)
    if resume:
        if sources or output is not None:
            raise InputError("resuming a fleet continues its runs with their own models and settings: "
                             "give no models and no output folder")
        sources, names, model_settings = _resumed(keeper, resume)
    else:
        if not sources:
            raise InputError("name at least one model to tune")
        if not settings.budget.bounded:
            raise InputError("give each model a budget: trials or tuning time")
        sources = [s if s in zoo.MODELS or not os.path.exists(s) else os.path.abspath(s) for s in sources]
        names = _names(sources)
        folder = os.path.abspath(output or "tunewise-out")  # as the workers must see it, wherever they run
        model_settings = [dataclasses.replace(settings, source=s, output=os.path.join(folder, name))
                          for s, name in zip(sources, names, strict=True)]
    fleet = _Fleet(cluster, url, restarts, list(resume))
    if not resume:
        remote_run = ray.remote(new_run).options(resources={MEASURE: 1}, max_retries=3)
        created = fleet.on_cluster(lambda: {i: remote_run.remote(_model_name(s), m.to_json(), url)
                                            for i, (s, m) in enumerate(zip(sources, model_settings, strict=True))})
        fleet.runs = [created[i] for i in range(len(sources))]
    runs = fleet.runs
    history: list[list[tuple[float, float]]] = [[] for _ in sources]
    finished, suspended = [False] * len(sources), [False] * len(sources)
    remote_round = ray.remote(tune_round).options(resources={MEASURE: 1}, max_retries=3)
    rounds = suspensions = resumptions = 0
    while True:
        views = [ModelView(name, tuple(h), f, s)
                 for name, h, f, s in zip(names, history, finished, suspended, strict=True)]
        plan = policy.plan(views, fleet.slots)
        if not plan.run:
            break
        for i in plan.suspend:
            suspended[i] = True
            keeper.set_status(runs[i], stores.SUSPENDED)
        suspensions, resumptions = suspensions + len(plan.suspend), resumptions + len(plan.resume)
        outcomes = fleet.on_cluster(lambda plan=plan: {
            i: remote_round.remote(sources[i], model_settings[i].to_json(), url, runs[i], round_seconds)
            for i in plan.run})
        for i, outcome in outcomes.items():
            suspended[i], finished[i] = False, outcome.finished
            if not history[i]:
                history[i].append((0.0, outcome.untuned))
            history[i].append((outcome.elapsed, outcome.latency))
        rounds += 1
        if on_round is not None:
            on_round(rounds, plan, names, outcomes)
    keeper.close()
    remote_finish = ray.remote(finish).options(resources={MEASURE: 1}, max_retries=3)
    done = fleet.on_cluster(lambda: {i: remote_finish.remote(run, url) for i, run in enumerate(runs) if history[i]})
    results = tuple(done.get(i) for i in range(len(runs)))
    return FleetResult(tuple(runs), results, rounds, suspensions, resumptions)


def resume_command(runs: Sequence[int], cluster: str, store_url: str) -> str:
    """The command line that continues the fleet of ``runs`` on ``cluster`` with the store at ``store_url`` (its
    password hidden)."""
    where = "" if is_local(cluster) else f" --cluster {cluster}"
    store = "" if store_url == stores.DEFAULT_URL else f" --store {stores.display_url(store_url)}"
    return f"tunewise tune-many --resume {','.join(map(str, runs))}{where}{store}"


class _Fleet:
    """A fleet's hold on its cluster: connected at once, its measurement slots counted, and every batch of Ray
    tasks run through :meth:`on_cluster`, which outlives a lost local cluster (see :func:`tune_many`)."""

    def __init__(self, cluster: str, url: str, restarts: int, runs: list[int]):
        self.cluster, self.url, self.restarts, self.runs = cluster, url, restarts, runs
        self.slots = connect(cluster)

    def on_cluster(self, submit: Callable[[], dict]) -> dict:
        """``{key: result}`` of the Ray tasks ``submit()`` starts (``{key: ref}``), started again on a local
        cluster started again when it is lost."""
        import ray

        while True:
            try:
                refs = submit()
                return dict(zip(refs, _get(list(refs.values())), strict=True))
            except KeyboardInterrupt as err:
                stop = err if isinstance(err, Interrupted) else Interrupted()
                if not self.runs:
                    raise stop.saying("no run of the fleet has a trial yet: start it again") from None
                raise stop.saying(f"runs {', '.join(map(str, self.runs))} keep every slot they stored, the rounds in "
                                  "flight dropped theirs: continue with "
                                  f"{resume_command(self.runs, self.cluster, self.url)}") from None
            except _lost_cluster_errors() as err:
                what = f"{type(err).__name__}: {message_line(err)}"
                if not is_local(self.cluster) or self.restarts < 1:
                    kept = (f"runs {', '.join(map(str, self.runs))} keep every slot they stored: continue with "
                            f"{resume_command(self.runs, self.cluster, self.url)}" if self.runs
                            else "no run has a trial yet: start the fleet again")
                    raise ClusterLostError(f"the Ray cluster {self.cluster!r} lost a process it needs ({what}); "
                                           f"{kept}") from None
                self.restarts -= 1
                _log.warning("the local Ray cluster lost a process it needs (%s): starting it again; the tasks in "
                             "flight run again from the store", what)
                ray.shutdown()
                self.slots = connect(self.cluster)


def _resumed(store, runs: Sequence[int]) -> tuple[list[str], list[str], list[RunSettings]]:
    """The sources, names and settings of the fleet's ``runs``, as their stored settings give them."""
    sources, names, settings = [], [], []
    for run in runs:
        spec = store.get_run(run)
        try:
            stored = RunSettings.from_json(spec.settings)
        except InputError as err:
            raise InputError(f"run {run} cannot be resumed: {err}") from None
        if spec.status == stores.IMPORTED or stored.source is None or stored.output is None:
            raise InputError(f"run {run} is not a fleet's run: continue it with tunewise tune --resume {run}")
        sources.append(stored.source)
        names.append(os.path.basename(stored.output))
        settings.append(stored)
    return sources, names, settings


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
            with contextlib.suppress(Exception):  # a lost cluster cancels nothing
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


def _model_name(source: str) -> str:
    """The name a model has in the store: the zoo name, or the file's name without its suffix."""
    return source if source in zoo.MODELS else os.path.splitext(os.path.basename(source))[0]


def _names(sources: Sequence[str]) -> list[str]:
    """A distinct name per model (:func:`_model_name`), numbered when repeated."""
    names: list[str] = []
    for source in sources:
        base = _model_name(source)
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}-{n}"
        names.append(name)
    return names
