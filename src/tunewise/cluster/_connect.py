"""Where a fleet runs: this machine (a local Ray instance started for it) or a running Ray cluster, and the
measurement slots it offers.

A node offers one measurement slot, the custom Ray resource :data:`MEASURE`, and every round of tuning holds
one: a round searches, builds and measures on its node, so no measurement shares a node's cores with another
measurement or with another round's builds. Nodes join a cluster with the resource set::

    ray start --head --resources='{"tunewise_measure": 1}'
    ray start --address=HEAD:6379 --resources='{"tunewise_measure": 1}'
"""

from __future__ import annotations

import logging
import re
import socket

from tunewise.errors import InputError, message_line
from tunewise.target import usable_cores

MEASURE = "tunewise_measure"
LOCAL = "local"
_ANSWER_SECONDS = 5.0  # how long a cluster's address has to accept a connection


def is_local(cluster: str) -> bool:
    """Whether ``cluster`` names this machine alone."""
    return cluster == LOCAL


def connect(cluster: str) -> int:
    """Connect this process to ``cluster`` (``"local"``: start Ray here with one measurement slot, unless this
    process is connected already; else a Ray address: ``ray://HOST:PORT``, ``HOST:PORT`` or ``auto``) and
    return its measurement slots. Raises :class:`~tunewise.errors.InputError` in one line when it cannot be
    reached or offers no slot."""
    import ray

    if not ray.is_initialized():
        try:
            if is_local(cluster):
                ray.init(address=LOCAL, num_cpus=usable_cores(), resources={MEASURE: 1}, include_dashboard=False,
                         log_to_driver=False, configure_logging=False)  # its own, never another one running here
            else:
                _check_reachable(cluster)
                ray.init(address=cluster, log_to_driver=False, configure_logging=False)
        except Exception as err:  # Ray raises ConnectionError, RuntimeError, ValueError... for a bad address
            raise InputError(f"cannot connect to the Ray cluster {cluster!r}: {message_line(err)}") from None
        _log_driver_messages()
    slots = int(ray.cluster_resources().get(MEASURE, 0))
    if slots < 1:
        raise InputError(f"the Ray cluster {cluster!r} offers no measurement slot: start each node with "
                         f"--resources='{{\"{MEASURE}\": 1}}'")
    return slots


def _log_driver_messages() -> None:
    """Send the messages Ray prints on a driver's standard output (the cluster's errors, such as a node marked
    dead, in several lines each) to the ``ray`` logger instead: a tunewise command keeps them in its third-party
    log (:mod:`tunewise.job.logs`), and says in one line what a loss means for the fleet."""
    from ray._private import worker

    log = logging.getLogger("ray")
    worker.print_to_stdstream = lambda data, ignore_prefix=False: log.warning("%s", " ".join(data.get("lines", [])))


def _check_reachable(address: str) -> None:
    """Raise :class:`~tunewise.errors.InputError` at once when nothing accepts connections at ``address``
    (``ray://HOST:PORT`` or ``HOST:PORT``; ``auto`` is left to Ray), where Ray itself would retry for minutes."""
    match = re.match(r"^(?:ray://)?\[?([^\]]+?)\]?:(\d+)$", address)
    if match is None:
        if address == "auto":
            return
        raise InputError(f"bad cluster {address!r}: expected local, auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((match.group(1), int(match.group(2))), timeout=_ANSWER_SECONDS).close()
    except OSError as err:
        raise InputError(f"cannot connect to the Ray cluster {address!r}: nothing answers at "
                         f"{match.group(1)}:{match.group(2)} ({err.strerror or err})") from None
