"""The manifests of the result folders, and the check that the documents cite exactly their files.

::

    .venv/bin/python bench/manifest.py          # writes each result folder's manifest.json, then checks
    .venv/bin/python bench/manifest.py --check  # checks only (exit 1 on a stale manifest or a bad citation)

A result folder is ``bench/results/current/`` (the headline benchmarks' results) or a study's
``bench/studies/<question>/results/``. Each holds a ``manifest.json``, one entry a result file: ``file``,
``command``, ``commit``, ``cpu``, ``gpu`` and ``date``, read from the file's ``provenance`` entry (or the same keys
at its top level); ``cpu`` gains the ``mcpu`` of the targets the file holds, ``gpu`` is its ``device`` (``None``:
no GPU used). A figure takes the entry of the JSON file of its name. A field the file lacks keeps the value the
manifest already records for it, else comes from git (the last commit that added or changed the file, marked
so), else is ``"unknown"``: so the manifest regenerates the same on a clone without that history.

A document is README.md, a page of ``docs/``, a ``.md`` file of ``bench/`` or of a study's folder. A citation is
a path in a document to a result folder or to a file in one, written from the repository root (``bench/...``)
or from the document's folder (``results/...``, ``../../results/current/...``): a file, or a file name without
its extension (a benchmark's ``--out`` stem). Every citation must be a file of a result folder, and every file
of a result folder must be cited.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CURRENT = "bench/results/current"
STUDIES = "bench/studies"
MANIFEST = "manifest.json"
DOCUMENTS = ("README.md", "docs/*.md", "bench/*.md", f"{STUDIES}/*/*.md")
FIELDS = ("command", "commit", "cpu", "date")
CITATION = re.compile(r"(?<![\w/.-])((?:\.\./|[\w.-]+/)*results/[\w./-]*\w)")


def folders(root: str = ROOT) -> list[str]:
    """The result folders, as paths from the repository root."""
    studies = sorted(os.path.relpath(path, root) for path in glob.glob(os.path.join(root, STUDIES, "*", "results")))
    return [CURRENT] * os.path.isdir(os.path.join(root, CURRENT)) + studies


def result_files(root: str = ROOT, folder: str | None = None) -> list[str]:
    """The files of ``folder`` (of every result folder if None) but its manifest, as paths from the root."""
    out = []
    for name in [folder] if folder else folders(root):
        out += sorted(f"{name}/{file}" for file in os.listdir(os.path.join(root, name)) if file != MANIFEST)
    return out


def committed(root: str, path: str) -> tuple[str, str] | None:
    """The hash and ISO date of the last commit that added or changed ``path`` (renames followed), or None."""
    try:
        out = subprocess.run(["git", "-C", root, "log", "--follow", "--diff-filter=ACM", "--format=%H%x09%cI",
                              "-1", "--", path], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return tuple(out.split("\t")) if out else None


def recorded(root: str, folder: str) -> dict[str, dict]:
    """The entries ``folder``'s manifest now holds, by file (none where it is missing or unreadable)."""
    try:
        with open(os.path.join(root, folder, MANIFEST)) as f:
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


def render(root: str = ROOT, folder: str = CURRENT) -> str:
    """The text of ``folder``'s ``manifest.json`` for the files of ``root``'s ``folder``."""
    known = recorded(root, folder)
    return json.dumps([entry(root, path, known.get(path)) for path in result_files(root, folder)], indent=1) + "\n"


def documents(root: str = ROOT) -> list[str]:
    """The documents that may cite results, as paths from the repository root."""
    return sorted({os.path.relpath(path, root) for pattern in DOCUMENTS for path in glob.glob(os.path.join(root,
                                                                                                        pattern))})


def citations(root: str = ROOT) -> dict[str, set[str]]:
    """Each document's cited result paths, from the repository root (paths outside ``bench/`` are not
    citations: a user's ``--out results/...`` in README.md, say)."""
    cited = {}
    for document in documents(root):
        with open(os.path.join(root, document)) as f:
            found = CITATION.findall(f.read())
        paths = {os.path.normpath(path if path.startswith("bench/") else
                                  os.path.join(os.path.dirname(document), path)) for path in found}
        cited[document] = {path for path in paths if path.startswith("bench/")}
    return cited


def problems(root: str = ROOT) -> list[str]:
    """What is wrong with the manifests and the citations; empty when nothing is."""
    out = []
    for folder in folders(root):
        try:
            with open(os.path.join(root, folder, MANIFEST)) as f:
                if f.read() != render(root, folder):
                    out.append(f"{folder}/{MANIFEST} is stale: run bench/manifest.py")
        except FileNotFoundError:
            out.append(f"{folder}/{MANIFEST} is missing: run bench/manifest.py")
    files = result_files(root)
    listed = files + [f"{folder}/{MANIFEST}" for folder in folders(root)]
    cited = citations(root)
    for document, paths in cited.items():
        for path in sorted(paths):
            folder = any(name == path or name.startswith(path + "/") for name in folders(root))
            if not folder and not any(path == f or f.startswith(path + ".") for f in listed):
                out.append(f"{document} cites {path}, which is not a file of a result folder")
    everything = set().union(*cited.values())
    out += [f"{path} is cited by no document" for path in files
            if path not in everything and os.path.splitext(path)[0] not in everything]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="check only; write nothing")
    args = parser.parse_args()
    if not args.check:
        for folder in folders():
            text = render(ROOT, folder)
            with open(os.path.join(ROOT, folder, MANIFEST), "w") as f:
                f.write(text)
    found = problems()
    for problem in found:
        print(problem, file=sys.stderr)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
