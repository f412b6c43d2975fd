"""bench/results/current/manifest.json is what bench/manifest.py makes of the result files, and the READMEs cite
exactly the files it lists. Only provenance and citations are read here, never a benchmark's figures."""

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


def test_the_committed_manifest_is_the_generated_one(manifest, tmp_path):
    (tmp_path / "manifest.json").write_text(manifest.render(ROOT))
    with open(os.path.join(ROOT, manifest.MANIFEST)) as f:
        assert f.read() == (tmp_path / "manifest.json").read_text()


def test_the_manifest_regenerates_the_same_without_the_repositorys_history(manifest, tmp_path):
    shutil.copytree(os.path.join(ROOT, manifest.CURRENT), tmp_path / manifest.CURRENT)  # a folder, not a clone
    with open(os.path.join(ROOT, manifest.MANIFEST)) as f:
        assert manifest.render(str(tmp_path)) == f.read()


def test_the_readmes_cite_exactly_the_current_results(manifest):
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
    (tmp_path / "README.md").write_text("[a](bench/results/current/a.json), [c](bench/results/c.json)\n")
    (tmp_path / "bench" / "README.md").write_text("`--out results/current/a`\n")

    entries = json.loads(manifest.render(str(tmp_path)))
    assert entries[0] == {"file": f"{manifest.CURRENT}/a.json", "command": "python bench/a.py", "commit": "abc",
                          "cpu": "AMD EPYC (znver4)", "date": "2026-01-01", "gpu": None}
    assert entries[1] == {**entries[0], "file": f"{manifest.CURRENT}/a.png"}
    assert entries[2]["command"] == entries[2]["commit"] == "unknown"
    assert manifest.problems(str(tmp_path)) == [
        f"{manifest.MANIFEST} is stale: run bench/manifest.py",
        f"README.md cites bench/results/c.json, which is not a file of {manifest.CURRENT}",
        f"{manifest.CURRENT}/b.json is cited by no README",
    ]
