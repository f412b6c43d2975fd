"""The store contract: what every backend keeps and how it may be used.

Values read from a store are frozen dataclasses; nothing here imports TVM. The MetaSchedule side (workload
equality, record JSON) lives in :mod:`tunewise.stores._database`, which reads and writes through this API.
"""

from __future__ import annotations

import abc
import json
import math
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tunewise.forecast import Forecast

#: Run statuses. ``running`` is also what a run killed without warning (SIGKILL, power loss) is left in;
#: :meth:`Run.state` tells it apart as ``dead`` by its owner's heartbeat. ``suspended``: a fleet's policy holds
#: the run back until it chooses it again (:mod:`tunewise.cluster`).
RUNNING, INTERRUPTED, FAILED, TUNED, FINISHED, IMPORTED, DEAD, SUSPENDED = (
    "running", "interrupted", "failed", "tuned", "finished", "imported", "dead", "suspended")

#: Seconds between two heartbeats of a run's owner, and the age after which a heartbeat is stale: its owner is
#: taken for dead, and another process may claim the run.
HEARTBEAT_INTERVAL, HEARTBEAT_STALE = 10.0, 60.0

_OWNER = re.compile(r"^pid (\d+) on (.+) \([0-9a-f]+\)$")


def owner_name() -> str:
    """A text naming this process as a run's owner: its id, its host, and a random tag."""
    return f"pid {os.getpid()} on {socket.gethostname()} ({uuid.uuid4().hex[:8]})"


def owner_gone(owner: str | None) -> bool:
    """Whether ``owner`` (an :func:`owner_name`) is a process of this host that no longer exists."""
    match = _OWNER.match(owner or "")
    if match is None or match.group(2) != socket.gethostname():
        return False
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process
        return False
    return False

#: A trial's ``origin`` when its schedule was made from a record base's record.
FROM_BASE = "base"

_MISSING_TIME = 1e10  # MetaSchedule's stub for a run time that was not measured


@dataclass(frozen=True)
class Run:
    """One tuning run (or one import of records). ``settings`` is the JSON object it was started with."""

    id: int
    model: str
    target: str
    scheduler: str
    settings: Mapping = field(default_factory=dict)
    status: str = RUNNING
    created: float = 0.0
    updated: float = 0.0  # last write of the run
    owner: str | None = None  # the process that owns the run (:meth:`Store.claim_run`)
    heartbeat: float | None = None  # the owner's last sign of life (``time.time()``)

    def state(self, now: float | None = None) -> str:
        """The status, except :data:`DEAD` for a ``running`` run that has no owner, whose owner's heartbeat is
        older than :data:`HEARTBEAT_STALE` seconds at ``now`` (default: the current time), or whose owner was
        a process of this host that is gone."""
        if self.status != RUNNING:
            return self.status
        now = time.time() if now is None else now
        if (self.owner is None or self.heartbeat is None or now - self.heartbeat > HEARTBEAT_STALE
                or owner_gone(self.owner)):
            return DEAD
        return RUNNING


@dataclass(frozen=True)
class StoredTask:
    """A task of a run, in the run's task order; ``workload`` is the store id of its TIR module."""

    index: int
    name: str
    workload: int
    weight: int
    flops: float
    default_latency: float


@dataclass(frozen=True)
class StoredTrial:
    """One measured candidate.

    ``record`` is MetaSchedule's JSON text of the tuning record (trace, run seconds, target, argument info;
    ``None`` when read without records), ``candidate`` the structural hash (hex) of the scheduled module that
    was measured, ``target`` the target's JSON text. ``task`` is ``None`` for imported records. ``origin`` is
    :data:`FROM_BASE` for a schedule made from a record base's record (:mod:`tunewise.sharing`), ``None`` for the
    run's own (searched, or shared from records of the store).
    """

    workload: int
    record: str | None
    run_secs: tuple[float, ...] = ()
    error: str | None = None
    message: str = ""
    task: int | None = None
    slot: int = 0
    target: str | None = None
    candidate: str | None = None
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    timestamp: float = 0.0
    origin: str | None = None

    @property
    def latency(self) -> float:
        """Mean of the measured repeats (what MetaSchedule ranks by); ``inf`` when nothing was measured."""
        return math.fsum(self.run_secs) / len(self.run_secs) if self.run_secs else math.inf


@dataclass(frozen=True)
class Checkpoint:
    """One scheduler decision of a run and where it left the run.

    ``trials`` is how many candidates the slot measured (0: the task's search space was exhausted),
    ``elapsed`` the run's tuning time after it, ``seconds`` the time the slot took, ``latency`` the
    model-latency estimate after it, ``joules`` the energy the slot used (``None``: not metered), ``skipped``
    the proposals a candidate filter (:mod:`tunewise.filters`) skipped in it, ``phase_joules`` the joules of
    its search, build and measure phases (``None``: not metered, or nothing was measured), ``forecast`` the
    model-latency forecast made after it (:class:`~tunewise.forecast.Forecast`; ``None``: none was made).
    """

    slot: int
    task: int
    trials: int
    elapsed: float
    seconds: float
    latency: float
    joules: float | None = None
    skipped: int = 0
    phase_joules: tuple[float, float, float] | None = None
    forecast: Forecast | None = None


@dataclass(frozen=True)
class ModelLatency:
    """The whole model, compiled with the run's best records after ``trials`` trials and ``elapsed`` seconds
    of tuning, ran in ``latency`` seconds (``inf``: the check failed, ``message`` says why), as read from its
    own median time ``timed`` and, timed in turn with the previous check's model, its ratio ``to_previous`` to
    that model's time in the same rounds (:func:`tunewise.tuning.model_checks.reading`; ``None``: not recorded, or no
    previous check). The check took ``seconds`` and ``joules`` (``None``: not metered)."""

    elapsed: float
    trials: int
    latency: float
    seconds: float
    joules: float | None = None
    message: str = ""
    timed: float | None = None
    to_previous: float | None = None

    @property
    def in_slow_stretch(self) -> bool:
        """Whether the check read the previous check's latency scaled, its own time coming in a slow stretch of
        the machine (:func:`tunewise.tuning.model_checks.reading`)."""
        return self.timed is not None and self.latency < self.timed


@dataclass(frozen=True)
class Artifact:
    """A compiled model saved by a run."""

    path: str
    metadata: Mapping
    created: float


def ranking_latency(record: str, run_secs: Sequence[float]) -> float | None:
    """The latency MetaSchedule ranks a record by, or ``None`` when it ignores the record.

    MetaSchedule's ``TuningRecord::IsValid``: the trace has an instruction before its post-processing, and
    some run time is not the ``1e10`` stub. ``record`` is the record's JSON text (``[trace, ...]`` with
    ``trace = [instructions, decisions]`` and each instruction ``[kind, ...]``).
    """
    instructions = json.loads(record)[0][0]
    if not instructions or instructions[0][0] == "EnterPostproc":
        return None
    if not any(s != _MISSING_TIME for s in run_secs):
        return None
    return math.fsum(run_secs) / len(run_secs)


class Store(abc.ABC):
    """Where runs, tasks, trials, checkpoints and artifacts live: the single source of truth of tuning.

    Contract:

    - Every method is one transaction: when it returns, what it wrote is durable and visible to every other
      handle on the same store, in this process or another; when it raises, it wrote nothing. So a process
      killed at any point loses only what it had not yet handed to the store.
    - Several processes (and threads) may use one store at once; writes never lose or corrupt each other.
      Workloads are the only shared rows written by several runs: :meth:`commit_workload` is atomic.
    - Runs, tasks, trials and checkpoints are append-only (only a run's status, owner, heartbeat, ``updated``
      and the settings given to :meth:`update_settings` change), so a value read once stays true; a run's
      trials and checkpoints come back in the order they were added.
    - Unknown run ids raise :class:`~tunewise.errors.InputError`.
    - Workloads are TIR modules, kept as TVM JSON text under their structural hash (hex); the store never
      interprets them: equality is decided by the caller's ``equal`` function.
    """

    def close(self) -> None:  # noqa: B027 (a store that holds nothing has nothing to release)
        """Release the store's connections; the handle is not used afterwards."""

    # -- runs ------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_run(self, model: str, target: str, scheduler: str, settings: Mapping, *,
                   status: str = RUNNING, owner: str | None = None) -> int:
        """Add a run and return its id; ``owner`` owns it from creation (:meth:`claim_run`)."""

    @abc.abstractmethod
    def get_run(self, run: int) -> Run:
        """The run with id ``run``."""

    @abc.abstractmethod
    def get_runs(self) -> list[Run]:
        """Every run, oldest first."""

    @abc.abstractmethod
    def set_status(self, run: int, status: str) -> None:
        """Change a run's status (and its ``updated`` time)."""

    @abc.abstractmethod
    def update_settings(self, run: int, changes: Mapping) -> None:
        """Set the keys ``changes`` gives in a run's settings (and its ``updated`` time); other keys stay."""

    # -- ownership -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def claim_run(self, run: int, owner: str, *, stale_after: float | None = None,
                  gone: str | None = None) -> None:
        """Make ``owner`` (a text naming one process) the owner of ``run`` and set its heartbeat to now, when
        the run has no owner, is ``owner``'s already, its owner's heartbeat is older than ``stale_after``
        seconds (default :data:`HEARTBEAT_STALE`), or its owner is ``gone`` (known to have ended). Atomic
        across processes: of several claims at once, one wins. Raises :class:`~tunewise.errors.RunBusyError`
        when another live owner holds the run."""

    @abc.abstractmethod
    def beat(self, run: int, owner: str) -> bool:
        """Set the heartbeat of ``run`` to now if ``owner`` owns it; whether it does."""

    @abc.abstractmethod
    def release_run(self, run: int, owner: str) -> None:
        """Give up ``owner``'s ownership of ``run`` (nothing when it does not own it)."""

    # -- workloads -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def commit_workload(self, shash: str, mod: str, equal: Callable[[str], bool]) -> int:
        """The id of the stored workload with hash ``shash`` for which ``equal(its_json)`` holds; if there is
        none, ``mod`` (its JSON) is stored under ``shash`` and its new id returned. Atomic across processes."""

    @abc.abstractmethod
    def get_workloads(self, shash: str) -> list[tuple[int, str]]:
        """``(id, json)`` of every workload stored under hash ``shash``."""

    @abc.abstractmethod
    def get_workload(self, workload: int) -> tuple[str, str]:
        """``(shash, json)`` of workload ``workload``."""

    # -- tasks, trials, checkpoints --------------------------------------------------------------------
    @abc.abstractmethod
    def add_tasks(self, run: int, tasks: Sequence[StoredTask]) -> None:
        """Set the tasks of a run that has none."""

    @abc.abstractmethod
    def get_tasks(self, run: int) -> list[StoredTask]:
        """The run's tasks in index order (empty for imports)."""

    @abc.abstractmethod
    def add_trials(self, run: int, trials: Sequence[StoredTrial], checkpoint: Checkpoint | None = None, *,
                   owner: str | None = None) -> None:
        """Append ``trials`` (and the checkpoint of the slot that measured them) to a run, all or nothing.
        With ``owner``, only while ``owner`` owns the run (its heartbeat is set too); else nothing is written
        and :class:`~tunewise.errors.RunBusyError` is raised."""

    @abc.abstractmethod
    def get_trials(self, run: int | None = None, *, records: bool = True) -> list[StoredTrial]:
        """A run's trials (every run's when ``run`` is None) in the order they were added; without their
        record JSON when ``records`` is false (much less to read)."""

    @abc.abstractmethod
    def top_trials(self, workload: int, k: int, target: str | None = None) -> list[StoredTrial]:
        """The ``k`` trials of ``workload`` (on ``target`` when given) that MetaSchedule would rank, best
        first: those with a :func:`ranking_latency`, by it; ties in the order they were added."""

    @abc.abstractmethod
    def ranked_workloads(self, target: str | None = None) -> list[int]:
        """The ids of the workloads (of every run) that have a trial :meth:`top_trials` ranks (on ``target``
        when given), in id order."""

    @abc.abstractmethod
    def count_trials(self) -> int:
        """How many trials the store holds, over all runs."""

    @abc.abstractmethod
    def get_checkpoints(self, run: int) -> list[Checkpoint]:
        """The run's checkpoints, oldest first."""

    @abc.abstractmethod
    def add_model_latency(self, run: int, point: ModelLatency) -> None:
        """Record a whole-model latency measured while tuning ``run``."""

    @abc.abstractmethod
    def get_model_latencies(self, run: int) -> list[ModelLatency]:
        """The whole-model latencies measured while tuning ``run``, oldest first."""

    # -- artifacts -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def add_artifact(self, run: int, path: str, metadata: Mapping) -> None:
        """Record a compiled model saved by ``run`` (``metadata`` is a JSON object)."""

    @abc.abstractmethod
    def get_artifacts(self, run: int) -> list[Artifact]:
        """The run's artifacts, oldest first."""
