"""The manifest of ``bench/results/current/``, and the check that the READMEs cite exactly its files.

::

    .venv/bin/python bench/manifest.py          # writes bench/results/current/manifest.json, then checks
    .venv/bin/python bench/manifest.py --check  # checks only (exit 1 on a stale manifest or a bad citation)

One entry a result file: ``file``, ``command``, ``commit``, ``cpu``, ``gpu`` and ``date``, read from the file's
``provenance`` entry (or the same keys at its top level); ``cpu`` gains the ``mcpu`` of the targets the file
holds, ``gpu`` is its ``device`` (``None``: no GPU used). A figure takes the entry of the JSON file of its name.
A field the file lacks keeps the value the manifest already records for it, else comes from git (the last
commit that added or changed the file, marked so), else is ``"unknown"``: so the manifest regenerates the
same on a clone without that history.

A citation is a ``bench/results/...`` path in README.md or bench/README.md (or ``results/...`` in the latter),
a file or a file name without its extension (a benchmark's ``--out`` stem). Every citation must be a file of
``current/`` listed in the manifest, and every file of ``current/`` must be cited.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CURRENT = "bench/results/current"
MANIFEST = f"{CURRENT}/manifest.json"
READMES = {"README.md": r"bench/results/", "bench/README.md": r"(?:bench/)?results/"}
FIELDS = ("command", "commit", "cpu", "date")


def result_files(root: str = ROOT) -> list[str]:
    """The files of ``current/`` but the manifest, as paths from the repository root."""
    folder = os.path.join(root, CURRENT)
    return sorted(f"{CURRENT}/{name}" for name in os.listdir(folder) if f"{CURRENT}/{name}" != MANIFEST)


def committed(root: str, path: str) -> tuple[str, str] | None:
    """The hash and ISO date of the last commit that added or changed ``path`` (renames followed), or None."""
    try:
        out = subprocess.run(["git", "-C", root, "log", "--follow", "--diff-filter=ACM", "--format=%H%x09%cI",
                              "-1", "--", path], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return tuple(out.split("\t")) if out else None


def recorded(root: str) -> dict[str, dict]:
    """The entries the manifest now holds, by file (none where it is missing or unreadable)."""
    try:
        with open(os.path.join(root, MANIFEST)) as f:
            return {item["file"]: item for item in json.load(f)}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def entry(root: str, path: str, known: dict | None = None) -> dict:
    """``path``'s manifest entry (see the module docstring); ``known`` is what the manifest records for it."""
    stem, ext = os.path.splitext(path)
    if ext != ".json" and os.path.exists(os.path.join(root, stem + ".json")):
        return {**entry(root, stem + ".json", known), "file": path}
    found: dict = {}
    if ext == ".json":
        with open(os.path.join(root, path)) as f:
            text = f.read()
        data = json.loads(text)
        record = data.get("provenance", data) if isinstance(data, dict) else {}
        found = {key: record[key] for key in FIELDS if isinstance(record.get(key), str)}
        cpus = sorted(set(re.findall(r'mcpu\W+(\w+)', text)) - set(found.get("cpu", "").split()))
        if cpus:
            found["cpu"] = f"{found.get('cpu', 'unknown')} ({', '.join(cpus)})"
        if isinstance(data, dict) and isinstance(data.get("device"), str):
            found["gpu"] = data["device"]
    for key in ("commit", "date"):
        if key not in found and "(committed)" in (known or {}).get(key, ""):
            found[key] = known[key]
    if not all(key in found for key in ("commit", "date")):
        git = committed(root, path)
        if git is not None:
            found.setdefault("commit", f"{git[0]} (committed)")
            found.setdefault("date", f"{git[1]} (committed)")
    return {"file": path, **{key: found.get(key, "unknown") for key in FIELDS}, "gpu": found.get("gpu")}


def render(root: str = ROOT) -> str:
    """The text of ``manifest.json`` for the files of ``root``'s ``current/``."""
    known = recorded(root)
    return json.dumps([entry(root, path, known.get(path)) for path in result_files(root)], indent=1) + "\n"


def citations(root: str = ROOT) -> dict[str, set[str]]:
    """Each README's cited result paths, from the repository root."""
    cited = {}
    for readme, prefix in READMES.items():
        with open(os.path.join(root, readme)) as f:
            text = f.read()
        found = re.findall(rf"(?<![\w/]){prefix}([\w./-]*\w)", text)
        cited[readme] = {"bench/results/" + path for path in found}
    return cited


def problems(root: str = ROOT) -> list[str]:
    """What is wrong with the manifest and the citations; empty when nothing is."""
    out = []
    try:
        with open(os.path.join(root, MANIFEST)) as f:
            if f.read() != render(root):
                out.append(f"{MANIFEST} is stale: run bench/manifest.py")
    except FileNotFoundError:
        out.append(f"{MANIFEST} is missing: run bench/manifest.py")
    files = result_files(root)
    listed = files + [MANIFEST]
    cited = citations(root)
    for readme, paths in cited.items():
        for path in sorted(paths):
            if path != CURRENT and not any(path == f or f.startswith(path + ".") for f in listed):
                out.append(f"{readme} cites {path}, which is not a file of {CURRENT}")
    everything = set().union(*cited.values())
    out += [f"{path} is cited by no README" for path in files
            if path not in everything and os.path.splitext(path)[0] not in everything]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="check only; write nothing")
    args = parser.parse_args()
    if not args.check:
        with open(os.path.join(ROOT, MANIFEST), "w") as f:
            f.write(render())
    found = problems()
    for problem in found:
        print(problem, file=sys.stderr)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
