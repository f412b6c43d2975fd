"""The tuning dataset: a fixed corpus tuned into a store per CPU, and exported for the pretrained cost model.

    .venv/bin/python bench/dataset.py list                                    # the corpus, one entry a line
    .venv/bin/python bench/dataset.py collect --store sqlite:////work/dataset/znver2.db --minutes-per-entry 3
    .venv/bin/python bench/dataset.py collect --store ... --only conv2d --limit 10   # the next 10 convolutions
    .venv/bin/python bench/dataset.py export --store sqlite:////work/dataset/znver2.db --out /work/dataset

The corpus (:func:`corpus`) is the zoo's models (``tunewise tasks --list``; the ``tiny-*`` test models aside)
and operator families on a fixed grid: convolutions of many shapes, strides and groups, depthwise and
pointwise ones, stems with 3 input channels, 1-D and transposed convolutions, dense layers and matmuls of
transformer and MLP shapes, batched matmuls of attention, pooling, normalisations, softmax and activations.
Each operator entry is a tiny torch module (weights seeded by ``--seed``) written as ``WORK/NAME.pt2`` and tuned
like any model. The held-out models of ``bench/heldout_models.py`` never enter the dataset: ``--only`` refuses
them and ``export`` leaves their runs out.

``collect`` tunes each entry as one run of ``--store`` named by the entry (``tunewise tune NAME --store URL
--no-references --time-budget M``, in a fresh process), for this machine's CPU (``--target``); so a store filled
by plain ``tunewise tune MODEL`` runs of zoo models is a dataset store too. An entry whose run for the target
is finished is skipped; one whose run was cut short is resumed (``tunewise tune --resume``). ``--only`` keeps
the entries whose name contains one of its comma-separated words, ``--limit`` tunes that many entries at most
(finished ones not counted), so that the dataset grows across sittings. Every run records its target (with
``mcpu``); its artifact the tunewise and TVM versions it was tuned with.

``export`` writes one file per CPU of the store, ``OUT/tunewise-dataset-v1-ISA-MCPU.json.gz``
(:data:`FORMAT`; ISA: :func:`tunewise.target.isa_class`): the workloads (their MetaSchedule JSON), every
successful trial (workload, record, latency), the runs (model, target, versions) and the exporting process's
versions and provenance. Apart from the provenance (command, commit, date), the file is the same for the same
store (sorted, gzip without a timestamp); ``bench/pretrain.py`` trains on it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import heldout_models
import provenance
import torch
from torch import nn

FORMAT = "tunewise-dataset"
VERSION = 1
EXCLUDED_ZOO = ("tiny-",)  # the zoo's test models


@dataclass(frozen=True)
class Entry:
    """One corpus entry: a zoo model (``family`` ``"zoo"``) or an operator module built by ``build``."""

    name: str
    family: str
    build: object = None  # () -> (nn.Module, example input tuple), for operator entries


def _ops() -> list[Entry]:
    """The operator families, on a fixed grid (no shape is read from a held-out model)."""
    entries: list[Entry] = []

    def add(name: str, family: str, make, shape):
        def build():
            module = make().eval()
            return module, (torch.randn(*shape),)
        entries.append(Entry(name, family, build))

    def conv(cin, cout, hw, k, stride=1, groups=1, act=nn.ReLU):
        return lambda: nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups), act())

    # convolutions: ResNet/VGG-like 3x3 and strided ones, 1x1 expansions and projections, 5x5 and 7x7
    for c, hw in ((16, 112), (32, 56), (64, 56), (64, 28), (128, 28), (128, 14), (256, 14), (256, 7), (512, 7)):
        add(f"conv2d-c{c}-o{c}-hw{hw}-k3-s1", "conv2d", conv(c, c, hw, 3), (1, c, hw, hw))
        if hw >= 14:
            add(f"conv2d-c{c}-o{2 * c}-hw{hw}-k3-s2", "conv2d", conv(c, 2 * c, hw, 3, 2), (1, c, hw, hw))
            add(f"conv2d-c{c}-o{2 * c}-hw{hw}-k1-s2", "conv2d", conv(c, 2 * c, hw, 1, 2), (1, c, hw, hw))
    for c, hw in ((32, 56), (64, 28), (128, 14)):
        add(f"conv2d-c{c}-o{c}-hw{hw}-k5-s1", "conv2d", conv(c, c, hw, 5), (1, c, hw, hw))
        add(f"conv2d-c{c}-o{c}-hw{hw}-k7-s1", "conv2d", conv(c, c, hw, 7), (1, c, hw, hw))
    # pointwise: expansions (x4, x6) and projections (/4), as in inverted residuals and bottlenecks
    for c, hw in ((16, 56), (24, 56), (32, 28), (64, 14), (96, 14), (160, 7), (320, 7)):
        add(f"pointwise-c{c}-o{4 * c}-hw{hw}", "pointwise", conv(c, 4 * c, hw, 1), (1, c, hw, hw))
        add(f"pointwise-c{6 * c}-o{c}-hw{hw}", "pointwise", conv(6 * c, c, hw, 1, act=nn.Identity),
            (1, 6 * c, hw, hw))
    # depthwise 3x3 and 5x5, strides 1 and 2
    for c, hw in ((32, 112), (96, 56), (144, 28), (192, 28), (384, 14), (576, 14), (960, 7)):
        for k in (3, 5):
            add(f"depthwise-c{c}-hw{hw}-k{k}-s1", "depthwise", conv(c, c, hw, k, 1, c), (1, c, hw, hw))
        add(f"depthwise-c{c}-hw{hw}-k3-s2", "depthwise", conv(c, c, hw, 3, 2, c), (1, c, hw, hw))
    # grouped (ResNeXt widths)
    for c, hw, g in ((64, 56, 32), (128, 56, 32), (256, 28, 32), (512, 14, 32), (128, 28, 4), (256, 14, 8)):
        add(f"grouped-c{c}-hw{hw}-g{g}-k3", "grouped", conv(c, c, hw, 3, 1, g), (1, c, hw, hw))
    # stems with 3 input channels: 3x3/s2, 7x7/s2, 4x4/s4 and 16x16/s16 patchifying
    for cout, hw, k, stride in ((16, 224, 3, 2), (32, 224, 3, 2), (64, 224, 7, 2), (24, 128, 3, 2),
                                (96, 224, 4, 4), (192, 224, 16, 16), (64, 96, 3, 1)):
        add(f"stem-o{cout}-hw{hw}-k{k}-s{stride}", "stem",
            lambda cout=cout, k=k, stride=stride: nn.Conv2d(3, cout, k, stride, k // 2 if k % 2 else 0),
            (1, 3, hw, hw))
    # 1-D and transposed convolutions
    for c, length, k, dilation in ((64, 256, 3, 1), (128, 128, 3, 2), (256, 64, 5, 1), (64, 512, 7, 4)):
        add(f"conv1d-c{c}-l{length}-k{k}-d{dilation}", "conv1d",
            lambda c=c, k=k, dilation=dilation: nn.Conv1d(c, c, k, padding=dilation * (k // 2), dilation=dilation),
            (1, c, length))
    for c, hw in ((128, 14), (64, 28), (32, 56)):
        add(f"deconv2d-c{c}-o{c // 2}-hw{hw}-k2-s2", "deconv2d",
            lambda c=c: nn.ConvTranspose2d(c, c // 2, 2, 2), (1, c, hw, hw))
    # dense: transformer projections and MLPs (tokens x features -> features), classifier heads
    for tokens, d in ((64, 256), (128, 384), (196, 384), (128, 512), (64, 768), (32, 1024)):
        add(f"dense-m{tokens}-k{d}-n{d}", "dense", lambda d=d: nn.Linear(d, d), (tokens, d))
        add(f"dense-m{tokens}-k{d}-n{4 * d}-gelu", "dense", lambda d=d: nn.Sequential(nn.Linear(d, 4 * d), nn.GELU()),
            (tokens, d))
        add(f"dense-m{tokens}-k{4 * d}-n{d}", "dense", lambda d=d: nn.Linear(4 * d, d), (tokens, 4 * d))
    for batch, k, n in ((1, 512, 1000), (1, 1280, 1000), (1, 2048, 1000), (8, 784, 512), (32, 512, 512),
                        (1, 4096, 4096), (16, 256, 10)):
        add(f"dense-m{batch}-k{k}-n{n}", "dense", lambda k=k, n=n: nn.Linear(k, n), (batch, k))
    # batched matmuls of attention: scores (Q K^T) and their product with V
    for heads, seq, dh in ((4, 64, 64), (6, 197, 64), (8, 128, 64), (12, 64, 64), (4, 256, 32), (16, 32, 128)):
        add(f"bmm-qk-b{heads}-s{seq}-d{dh}", "bmm", lambda: _Scores(), (2, heads, seq, dh))
        add(f"bmm-av-b{heads}-s{seq}-d{dh}", "bmm", lambda seq=seq: _AttendValues(seq), (heads, seq, dh))
    # pooling
    for c, hw in ((64, 112), (64, 56), (128, 28), (256, 14)):
        add(f"maxpool-c{c}-hw{hw}-k3-s2", "pool", lambda: nn.MaxPool2d(3, 2, 1), (1, c, hw, hw))
        add(f"avgpool-c{c}-hw{hw}-k2-s2", "pool", lambda: nn.AvgPool2d(2, 2), (1, c, hw, hw))
    for c, hw in ((512, 7), (1280, 7), (2048, 7), (768, 14)):
        add(f"globalpool-c{c}-hw{hw}", "pool", lambda: nn.AdaptiveAvgPool2d(1), (1, c, hw, hw))
    # normalisations
    for tokens, d in ((64, 256), (197, 384), (128, 768), (512, 512)):
        add(f"layernorm-m{tokens}-d{d}", "norm", lambda d=d: nn.LayerNorm(d), (1, tokens, d))
        add(f"rmsnorm-m{tokens}-d{d}", "norm", lambda: _RMSNorm(), (1, tokens, d))
    for c, hw, groups in ((64, 56, 32), (128, 28, 32), (256, 14, 8)):
        add(f"groupnorm-c{c}-hw{hw}-g{groups}", "norm", lambda c=c, groups=groups: nn.GroupNorm(groups, c),
            (1, c, hw, hw))
    # softmax over attention scores and logits
    for heads, seq in ((4, 64), (8, 128), (6, 197), (12, 256)):
        add(f"softmax-b{heads}-s{seq}", "softmax", lambda: nn.Softmax(-1), (1, heads, seq, seq))
    add("softmax-m1-n1000", "softmax", lambda: nn.Softmax(-1), (1, 1000))
    # activations the zoo's blocks use, on feature maps and token features
    for act in (nn.GELU, nn.SiLU, nn.Hardswish, nn.Sigmoid, nn.Tanh):
        add(f"{act.__name__.lower()}-c96-hw56", "activation", act, (1, 96, 56, 56))
        add(f"{act.__name__.lower()}-m197-d1536", "activation", act, (1, 197, 1536))
    return entries


class _Scores(nn.Module):
    """Attention scores ``q @ k^T / sqrt(d)`` of an input holding ``q`` and ``k`` stacked."""

    def forward(self, qk):
        return qk[0] @ qk[1].transpose(-1, -2) * qk.shape[-1] ** -0.5


class _AttendValues(nn.Module):
    """Softmaxed scores (fixed, random) times the input ``v``."""

    def __init__(self, seq: int):
        super().__init__()
        self.probs = nn.Parameter(torch.softmax(torch.randn(1, seq, seq), -1), requires_grad=False)

    def forward(self, v):
        return self.probs @ v


class _RMSNorm(nn.Module):
    """RMS normalisation over the last axis."""

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def corpus() -> list[Entry]:
    """Every entry: the zoo's models, then the operator families; no held-out model among them."""
    from tunewise import zoo

    entries = [Entry(name, "zoo") for name in zoo.MODELS if not name.startswith(EXCLUDED_ZOO)]
    entries += _ops()
    clash = {e.name for e in entries} & set(heldout_models.MODELS)
    assert not clash, f"corpus entries named as held-out models: {clash}"
    return entries


def select(entries: list[Entry], only: str | None) -> list[Entry]:
    """The entries whose name contains one of ``only``'s comma-separated words (all without ``only``); a word
    naming a held-out model is refused (``SystemExit``, exit code 2)."""
    if not only:
        return entries
    words = [w.strip() for w in only.split(",") if w.strip()]
    held = [w for w in words if w in heldout_models.MODELS]
    if held:
        _fail(f"{', '.join(held)}: held out (bench/heldout_models.py), never tuned into the dataset")
    chosen = [e for e in entries if any(w in e.name for w in words)]
    if not chosen:
        _fail(f"no corpus entry matches --only {only} (see: bench/dataset.py list)")
    return chosen


def _fail(message: str) -> None:
    print(f"dataset: {message}", file=sys.stderr)
    raise SystemExit(2)


def write_module(entry: Entry, folder: str, seed: int) -> str:
    """``folder/NAME.pt2``, the ``torch.export`` program of an operator entry with weights seeded by ``seed``
    (written once; a resumed run re-imports the same file)."""
    path = os.path.join(folder, f"{entry.name}.pt2")
    if not os.path.exists(path):
        torch.manual_seed(seed)
        module, example = entry.build()
        partial = os.path.join(folder, f"{entry.name}.partial.pt2")
        torch.export.save(torch.export.export(module, example), partial)
        os.replace(partial, path)
    return path


def _runs_by_model(store, target: str) -> dict:
    """The store's latest run for ``target`` of each model name."""
    runs = {}
    for run in sorted(store.get_runs(), key=lambda r: r.id):
        if run.target == target:
            runs[run.model] = run
    return runs


def _tunewise() -> list[str]:
    return [os.path.join(os.path.dirname(sys.executable), "tunewise")]


def collect(args) -> None:
    from tunewise import stores
    from tunewise import target as targets

    entries = select(corpus(), args.only)
    target = targets.resolve(args.target)
    target_text = str(target)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    tuned = 0
    for entry in entries:
        if args.limit is not None and tuned >= args.limit:
            break
        store = stores.create(args.store)
        try:
            run = _runs_by_model(store, target_text).get(entry.name)
        finally:
            store.close()
        if run is not None and run.status == stores.FINISHED:
            continue
        common = ["--store", args.store, "--no-references", "--output", os.path.join(work, "artifacts", entry.name)]
        if run is not None:
            if entry.family != "zoo":
                write_module(entry, work, args.seed)  # the run re-imports the file it was started on
            command = [*_tunewise(), "tune", "--resume", str(run.id), *common]
            print(f"{entry.name}: resuming run {run.id} ({run.status})", flush=True)
        else:
            source = entry.name if entry.family == "zoo" else write_module(entry, work, args.seed)
            command = [*_tunewise(), "tune", source, "--time-budget", f"{round(args.minutes_per_entry * 60)}s",
                       "--seed", str(args.seed), *common]
            if args.target:
                command += ["--target", args.target]
            print(f"{entry.name}: tuning for {args.minutes_per_entry} min", flush=True)
        done = subprocess.run(command, cwd=work, stdout=None if args.verbose else subprocess.DEVNULL)
        tuned += 1
        if done.returncode == 130 or done.returncode < 0:  # stopped: the entry resumes next time
            print(f"{entry.name}: stopped; the next collect resumes it", flush=True)
            raise SystemExit(130)
        if done.returncode != 0:
            print(f"{entry.name}: tunewise exited {done.returncode}; the next collect retries it", flush=True)


def cpu_of(target_text: str) -> tuple[str | None, str | None]:
    """``(isa_class, mcpu)`` of a stored run's target (``None`` for each that it lacks)."""
    import tvm

    from tunewise import target as targets

    target = tvm.target.Target(json.loads(target_text))
    return targets.isa_class(target), (str(target.attrs["mcpu"]) if "mcpu" in target.attrs else None)


def export(args) -> list[str]:
    """Write the dataset files of ``args.store`` to ``args.out``; their paths."""
    from tunewise import stores
    from tunewise.tuning import tvm_env

    store = stores.create(args.store)
    parts: dict[tuple, dict] = {}
    left_out = set()
    try:
        for run in sorted(store.get_runs(), key=lambda r: r.id):
            if run.status == stores.IMPORTED:
                continue
            if run.model in heldout_models.MODELS:
                left_out.add(run.model)
                continue
            isa, mcpu = cpu_of(run.target)
            part = parts.setdefault((isa, mcpu), {"runs": [], "trials": [], "workloads": {}, "target": run.target})
            artifacts = store.get_artifacts(run.id)
            versions = next((a.metadata["versions"] for a in reversed(artifacts) if "versions" in a.metadata), None)
            part["runs"].append({"run": run.id, "model": run.model, "status": run.status, "target": run.target,
                                 "seed": run.settings.get("seed"), "versions": versions})
            for trial in store.get_trials(run.id):
                if trial.error or not trial.record or not trial.run_secs:
                    continue
                if trial.workload not in part["workloads"]:
                    shash, mod = store.get_workload(trial.workload)
                    part["workloads"][trial.workload] = {"shash": shash, "mod": mod}
                part["trials"].append({"run": run.id, "workload": trial.workload, "record": trial.record,
                                       "latency": trial.latency})
    finally:
        store.close()
    if left_out:
        print(f"left out the held-out models' runs: {', '.join(sorted(left_out))}")
    os.makedirs(args.out, exist_ok=True)
    written = []
    versions = tvm_env.versions()
    for (isa, mcpu), part in sorted(parts.items(), key=lambda kv: str(kv[0])):
        data = {"format": FORMAT, "version": VERSION, "cpu": {"isa_class": isa, "mcpu": mcpu, "target": part["target"]},
                "versions": versions, "provenance": provenance.stamp(), "runs": part["runs"],
                "workloads": {str(k): v for k, v in sorted(part["workloads"].items())}, "trials": part["trials"]}
        path = os.path.join(args.out, f"{FORMAT}-v{VERSION}-{isa or 'other'}-{mcpu or 'generic'}.json.gz")
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            f.write(json.dumps(data, sort_keys=True).encode("utf-8"))
        written.append(path)
        print(f"{path}: {len(part['runs'])} runs, {len(part['workloads'])} workloads, {len(part['trials'])} trials")
    return written


def read(path: str) -> dict:
    """A dataset file :func:`export` wrote; ``ValueError`` when it is not one of this format's version."""
    with gzip.open(path, "rb") as f:
        data = json.loads(f.read().decode("utf-8"))
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise ValueError(f"{path} is not a {FORMAT} file of version {VERSION}")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="print the corpus")
    listing.add_argument("--only")
    tune = sub.add_parser("collect", help="tune the corpus into a dataset store")
    tune.add_argument("--store", required=True)
    tune.add_argument("--minutes-per-entry", type=float, default=3.0)
    tune.add_argument("--only", help="comma-separated words: the entries whose name contains one")
    tune.add_argument("--limit", type=int, help="tune at most this many entries in this sitting")
    tune.add_argument("--target", help="tunewise tune's --target (default: this CPU)")
    tune.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "tunewise-dataset"),
                      help="where the operator modules and the artifacts are written")
    tune.add_argument("--seed", type=int, default=0)
    tune.add_argument("--verbose", action="store_true", help="show tunewise's output")
    out = sub.add_parser("export", help="write the dataset files of a store, one per CPU")
    out.add_argument("--store", required=True)
    out.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "list":
        for entry in select(corpus(), args.only):
            print(f"{entry.family:10s} {entry.name}")
    elif args.command == "collect":
        collect(args)
    else:
        export(args)


if __name__ == "__main__":
    main()
