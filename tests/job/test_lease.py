"""One owner per run: an owner is gone when its process is, and a lease beats while held and gives the run up
after (real tuning processes contending for a run: ``test_resume.py``)."""

import re
import socket
import subprocess
import sys
import time

import pytest

from tunewise import stores
from tunewise.errors import RunBusyError
from tunewise.job import lease
from tunewise.stores import _base


def test_an_owner_is_gone_when_its_process_on_this_host_is():
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    assert _base.owner_gone(f"pid {ended.stdout.strip()} on {host} (0123abcd)")
    assert not _base.owner_gone(_base.owner_name())  # this process
    assert not _base.owner_gone(f"pid {ended.stdout.strip()} on other-{host} (0123abcd)")  # cannot tell: alive


def test_a_lease_beats_and_gives_the_run_up(tmp_path):
    store = stores.create(f"sqlite:///{tmp_path}/tunewise.db")
    run = store.create_run("m", "cpu", "random", {})
    with lease.Lease(interval=0.05) as owned:
        owned.claim(store, run)
        first = store.get_run(run).heartbeat
        with pytest.raises(RunBusyError,
                           match=re.escape(f"run {run} is being tuned by another process ({owned.owner}, alive")):
            lease.Lease().claim(store, run)
        deadline = time.monotonic() + 10
        while store.get_run(run).heartbeat == first:
            assert time.monotonic() < deadline, "no heartbeat"
            time.sleep(0.05)
        assert store.get_run(run).owner == owned.owner
    assert store.get_run(run).owner is None
