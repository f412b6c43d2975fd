"""Each result folder's manifest.json is what bench/manifest.py makes of its result files, and the documents cite
exactly the files the manifests list. Only provenance and citations are read here, never a benchmark's figures."""

import importlib.util
import json
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def manifest():
    spec = importlib.util.spec_from_file_location("bench_manifest", os.path.join(ROOT, "bench", "manifest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_manifests_are_the_generated_ones(manifest):
    assert manifest.CURRENT in manifest.folders(ROOT)
    for folder in manifest.folders(ROOT):
        with open(os.path.join(ROOT, folder, manifest.MANIFEST)) as f:
            assert f.read() == manifest.render(ROOT, folder), folder


def test_the_manifests_regenerate_the_same_without_the_repositorys_history(manifest, tmp_path):
    for folder in manifest.folders(ROOT):  # folders, not a clone
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder)
    for folder in manifest.folders(ROOT):
        with open(os.path.join(ROOT, folder, manifest.MANIFEST)) as f:
            assert manifest.render(str(tmp_path), folder) == f.read(), folder


def test_the_documents_cite_exactly_the_results(manifest):
    assert manifest.result_files(ROOT)
    assert manifest.problems(ROOT) == []


def test_a_stale_manifest_a_missing_citation_and_an_uncited_file_are_reported(manifest, tmp_path):
    current = tmp_path / manifest.CURRENT
    current.mkdir(parents=True)
    (current / "a.json").write_text(json.dumps({"provenance": {"command": "python bench/a.py", "commit": "abc",
                                                               "cpu": "AMD EPYC", "date": "2026-01-01"},
                                                "target": "llvm -mcpu=znver4"}))
    (current / "a.png").write_bytes(b"")
    (current / "b.json").write_text("{}")
    (current / "manifest.json").write_text("[]\n")
    study = tmp_path / manifest.STUDIES / "q"
    (study / "results").mkdir(parents=True)
    (study / "results" / "s.json").write_text(json.dumps({"command": "python bench/studies/q/s.py", "commit": "d",
                                                          "cpu": "Intel", "date": "2026-01-02"}))
    (study / "findings.md").write_text("[s](results/s.json), [a](../../results/current/a.json), [x](results/x)\n")
    (tmp_path / "README.md").write_text("[a](bench/results/current/a.json), [c](bench/results/c.json), "
                                        "`tunewise tune --out results/mine.json`\n")
    (tmp_path / "bench" / "README.md").write_text("`--out results/current/a`\n")

    entries = json.loads(manifest.render(str(tmp_path)))
    assert entries[0] == {"file": f"{manifest.CURRENT}/a.json", "command": "python bench/a.py", "commit": "abc",
                          "cpu": "AMD EPYC (znver4)", "date": "2026-01-01", "gpu": None}
    assert entries[1] == {**entries[0], "file": f"{manifest.CURRENT}/a.png"}
    assert entries[2]["command"] == entries[2]["commit"] == "unknown"
    assert manifest.folders(str(tmp_path)) == [manifest.CURRENT, "bench/studies/q/results"]
    assert manifest.problems(str(tmp_path)) == [
        f"{manifest.CURRENT}/manifest.json is stale: run bench/manifest.py",
        "bench/studies/q/results/manifest.json is missing: run bench/manifest.py",
        "README.md cites bench/results/c.json, which is not a file of a result folder",
        "bench/studies/q/findings.md cites bench/studies/q/results/x, which is not a file of a result folder",
        f"{manifest.CURRENT}/b.json is cited by no document",
    ]
