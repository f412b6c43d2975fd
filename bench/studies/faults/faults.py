"""Faults an operator meets, on tiny models, each in a folder and a store of its own: the table of what each
left (exit code, trials kept, trials lost, the last line printed).

A case passes when its fault and the resume after it lose no trial the store held, measure no candidate twice,
and its message is one line that names what happened and what to run next. Run as root for the full-disk
cases (they mount a 4 MiB tmpfs; skipped otherwise). Every tuning process runs
``tunewise --no-references --timing-rounds 3``, so a case takes a minute or two on a 2-core machine.

    .venv/bin/python bench/studies/faults/faults.py                      # every case
    .venv/bin/python bench/studies/faults/faults.py --cases sigterm ray-system-process --keep /tmp/faults
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tunewise import stores

TRIALS, PER_SLOT = 6, 2
_QUICK = ["--no-references", "--timing-rounds", "3"]


@dataclass
class Outcome:
    """A case's row: the exit codes in order, the trials the store kept after the fault, the trials lost
    (stored before and missing after, plus candidates measured twice), the fault's last line, and whether the
    case holds."""

    exits: list[int]
    kept: int
    lost: int
    message: str
    passed: bool


class Case:
    """One case's folder, store and processes."""

    def __init__(self, folder: Path, store_folder: Path | None = None):
        self.folder = folder
        self.url = f"sqlite:///{store_folder or folder}/tunewise.db"
        self.logs = 0

    def start(self, *args, command: str = "tune") -> subprocess.Popen:
        self.logs += 1
        log = open(self.folder / f"out-{self.logs}.log", "w")  # noqa: SIM115 (the process keeps it)
        process = subprocess.Popen([sys.executable, "-m", "tunewise.cli", command, *map(str, args)], cwd=self.folder,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        process.log = log.name
        return process

    def tune(self, *args, trials: int = TRIALS) -> subprocess.Popen:
        return self.start("tiny-mlp", "--trials", trials, "--trials-per-slot", PER_SLOT, *_QUICK, "--store", self.url,
                          "-o", self.folder / "out", *args)

    def run(self, *args, command: str = "tune", timeout: float = 900) -> tuple[int, str]:
        process = self.start(*args, command=command)
        return process.wait(timeout=timeout), Path(process.log).read_text()

    def store(self):
        return stores.create(self.url, read_only=True)

    def trials(self) -> list[tuple]:
        """``(run, task, candidate)`` of every trial in the store."""
        with contextlib.suppress(Exception), contextlib.closing(self.store()) as store:
            return [(run.id, t.task, t.candidate) for run in store.get_runs()
                    for t in store.get_trials(run.id, records=False)]
        return []

    def wait_for(self, process: subprocess.Popen, ready: Callable[[], bool], timeout: float = 900) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if process.poll() is not None:
                raise RuntimeError(f"exited early with {process.returncode}: {Path(process.log).read_text()[-500:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the fault's moment never came")
            time.sleep(0.2)


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("tunewise: third-party log")]
    return lines[-1] if lines else ""


def lost(before: list, after: list) -> int:
    """Trials stored before and missing after, and candidates stored twice."""
    keys = set(after)
    return sum(trial not in keys for trial in before) + len(after) - len(keys)


def _resume_and_count(case: Case, exits: list, message: str, before: list, *, pattern: str,
                      expect_trials: int = TRIALS, extra: tuple = ()) -> Outcome:
    """Resume the run the message names and check the message, the resume and the store."""
    match = re.search(r"continue with (tunewise tune(?:-many)? --resume \S+(?: --store \S+)?)$", message)
    holds = bool(re.search(pattern, message)) and match is not None and "Traceback" not in message
    if match is not None:
        code, _ = case.run(*match.group(1).split()[2:], *(_QUICK if "tune-many" not in match.group(1) else ()),
                           *extra, command=match.group(1).split()[1])
        exits.append(code)
        holds = holds and code == 0
    after = case.trials()
    count = lost(before, after)
    return Outcome(exits, len(before), count, message, holds and count == 0 and len(after) == expect_trials)


def signal_case(signum: int, pattern: str) -> Callable[[Case], Outcome]:
    def case_fn(case: Case) -> Outcome:
        process = case.tune()
        case.wait_for(process, lambda: len(case.trials()) >= PER_SLOT)
        time.sleep(1.0)  # into the next slot, which SIGTERM drops
        (os.killpg if signum == signal.SIGINT else os.kill)(process.pid, signum)
        code = process.wait(timeout=600)
        message, before = last_line(Path(process.log).read_text()), case.trials()
        kept = re.search(r"the (\d+) trials? measured", message)
        outcome = _resume_and_count(case, [code], message, before, pattern=pattern)
        outcome.passed = outcome.passed and code == 128 + signum and kept is not None and int(kept[1]) == len(before)
        return outcome
    return case_fn


def kill9_compiling(case: Case) -> Outcome:
    """``kill -9`` once every trial is in, while the model compiles: the resume finishes from the store."""
    process = case.tune()
    case.wait_for(process, lambda: len(case.trials()) >= TRIALS)
    time.sleep(1.0)
    os.killpg(process.pid, signal.SIGKILL)
    code = process.wait()
    before = case.trials()
    with contextlib.closing(case.store()) as store:
        run = store.get_runs()[0].id
    resumed, _ = case.run("--resume", run, *_QUICK, "--store", case.url)
    after = case.trials()
    return Outcome([code, resumed], len(before), lost(before, after), "(killed: prints nothing)",
                   resumed == 0 and lost(before, after) == 0 and len(after) == TRIALS)


@contextlib.contextmanager
def small_filesystem(folder: Path):
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True).returncode:
        raise RuntimeError("cannot mount a tmpfs here (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def disk_full(after_slots: int) -> Callable[[Case], Outcome]:
    """The store's disk fills after ``after_slots`` slots (0: once the run exists, before its first slot)."""

    def case_fn(case: Case) -> Outcome:
        with small_filesystem(case.folder / "small") as small:
            case.url = f"sqlite:///{small}/tunewise.db"
            process = case.tune()

            def ready() -> bool:
                if after_slots:
                    return len(case.trials()) >= after_slots * PER_SLOT
                with contextlib.suppress(Exception), contextlib.closing(case.store()) as store:
                    return bool(store.get_runs())
                return False

            case.wait_for(process, ready)
            with contextlib.suppress(OSError), open(small / "filler", "wb") as filler:
                while True:
                    filler.write(bytes(1 << 16))
                    filler.flush()
            code = process.wait(timeout=600)
            message, before = last_line(Path(process.log).read_text()), case.trials()
            with contextlib.closing(case.store()) as store:
                status = store.get_runs()[0].state()
            os.remove(small / "filler")
            outcome = _resume_and_count(case, [code], message, before, pattern="disk is full")
            outcome.passed = outcome.passed and code == 2 and status == stores.FAILED
            outcome.message = f"[{status}] {message}"
            return outcome
    return case_fn


def truncated_store(case: Case) -> Outcome:
    process = case.tune(trials=PER_SLOT)
    code = process.wait(timeout=900)
    path = case.folder / "tunewise.db"
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)
    shown, output = case.run("--store", case.url, command="runs")
    message = last_line(output)
    return Outcome([code, shown], 0, 0, message, shown == 2 and "\n" not in message.strip()
                   and "store" in message and "Traceback" not in output)


def two_resumes(case: Case) -> Outcome:
    """A run killed mid-slot, then two resumes at once: one tunes it, the other says who owns it."""
    process = case.tune()
    case.wait_for(process, lambda: len(case.trials()) >= PER_SLOT)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    before = case.trials()
    with contextlib.closing(case.store()) as store:
        run = store.get_runs()[0].id
    both = [case.start("--resume", run, *_QUICK, "--store", case.url) for _ in range(2)]
    codes = [p.wait(timeout=900) for p in both]
    messages = [last_line(Path(p.log).read_text()) for p in both]
    after = case.trials()
    refused = [m for c, m in zip(codes, messages, strict=True) if c == 2]
    return Outcome([-9, *codes], len(before), lost(before, after), refused[0] if refused else messages[0],
                   sorted(codes) == [0, 2] and lost(before, after) == 0 and len(after) == TRIALS)


def resume_keeps_settings(case: Case) -> Outcome:
    """A run started with --no-references and --timing-rounds 3, resumed with neither: no reference is timed."""
    process = case.start("tiny-mlp", "--trials", PER_SLOT, "--trials-per-slot", PER_SLOT, *_QUICK,
                         "--store", case.url, "-o", case.folder / "out")
    first = process.wait(timeout=900)
    code, output = case.run("--resume", "1", "--trials", 2 * PER_SLOT, "--store", case.url)
    references = "PyTorch eager" in output or "onnxruntime" in output
    return Outcome([first, code], PER_SLOT, 0, "references timed on resume" if references else "no reference timed",
                   first == 0 and code == 0 and not references and "3 rounds" in output)


def bad_store_url(case: Case) -> Outcome:
    code, output = case.run("--store", "foo://bar/baz", command="runs")
    message = last_line(output)
    return Outcome([code], 0, 0, message, code == 2 and "sqlite:///" in message and "postgresql" in message)


def dynamic_input(case: Case) -> Outcome:
    import onnx
    from onnx import TensorProto, helper

    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], [0.0] * 32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10),
              case.folder / "dyn.onnx")
    code, output = case.run(case.folder / "dyn.onnx", "--no-measure", command="tasks")
    message = last_line(output)
    return Outcome([code], 0, 0, message, code == 2 and "--input-shape x=1,8 " in message)


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _ray_child(name: str, root: int) -> int | None:
    """The process id of a descendant of process ``root`` whose command line starts with ``name`` (a Ray
    process, ``ray::...``), if one runs: never another user's Ray."""
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/cmdline") as f:
            if f.read().startswith(name):
                ancestor = pid
                while ancestor > 1:
                    ancestor = _parent(ancestor)
                    if ancestor == root:
                        return pid
    return None


def ray_kill(name: str) -> Callable[[Case], Outcome]:
    """``tune-many`` of two models on the local cluster, the Ray process ``name`` killed once a trial is in."""

    def case_fn(case: Case) -> Outcome:
        process = case.start("tiny-mlp", "tiny-mlp", "--trials", 4, "--round", "1s", "--no-references",
                             "--store", case.url, "-o", case.folder / "out", command="tune-many")
        case.wait_for(process, lambda: len(case.trials()) >= 1 and _ray_child(name, process.pid) is not None)
        os.kill(_ray_child(name, process.pid), signal.SIGKILL)
        before = case.trials()
        code = process.wait(timeout=900)
        output = Path(process.log).read_text()
        after = case.trials()
        if code != 0:  # a lost cluster: the message names the command that continues
            return _resume_and_count(case, [code], last_line(output), before, pattern="lost", expect_trials=8)
        said = [line for line in output.splitlines() if "lost a process" in line]  # the cluster started again
        return Outcome([code], len(before), lost(before, after), said[0] if said else last_line(output),
                       lost(before, after) == 0 and len(after) == 8 and "Traceback" not in output
                       and "(raylet)" not in output)
    return case_fn


CASES: dict[str, Callable[[Case], Outcome]] = {
    "sigint": signal_case(signal.SIGINT, r"^tunewise: interrupted \(SIGINT\); the \d+ trials? measured"),
    "sigterm": signal_case(signal.SIGTERM, r"^tunewise: interrupted \(SIGTERM\); the \d+ trials? measured .*"
                                           r"(, and the slot in flight, \d+ candidates, was dropped)?"),
    "kill-9-compiling": kill9_compiling,
    "disk-full-after-a-slot": disk_full(1),
    "disk-full-before-the-first": disk_full(0),
    "truncated-store": truncated_store,
    "two-resumes": two_resumes,
    "resume-keeps-settings": resume_keeps_settings,
    "unknown-store-scheme": bad_store_url,
    "dynamic-onnx-input": dynamic_input,
    "ray-worker": ray_kill("ray::tune_round"),
    "ray-system-process": ray_kill("ray::DashboardAgent"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--keep", help="folder to keep each case's folder in (default: a temporary one, removed)")
    args = parser.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="tunewise-faults-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"{'case':28s} {'exit':12s} {'kept':>4s} {'lost':>4s} {'ok':3s} message")
    failed = 0
    for name in args.cases:
        folder = root / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        start = time.perf_counter()
        try:
            outcome = CASES[name](Case(folder))
        except Exception as err:  # noqa: BLE001 (a case that cannot run is a row that fails)
            outcome = Outcome([], 0, 0, f"case could not run: {err}".splitlines()[0], False)
        failed += not outcome.passed
        exits = ",".join(map(str, outcome.exits))
        print(f"{name:28s} {exits:12s} {outcome.kept:4d} {outcome.lost:4d} {'yes' if outcome.passed else 'NO':3s} "
              f"{outcome.message[:400]}  ({time.perf_counter() - start:.0f}s)", flush=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
