"""Imported models are kept on disk: a second import of the same zoo model or file contents is read back, not
exported again; anything else that changes the import misses; a damaged entry is imported again."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import tvm

from tunewise.importing import frontend, import_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder of this test's own; its entries' folder."""
    monkeypatch.setenv(import_cache.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache" / "imports"


def _pt2(path, scale: float) -> str:
    class Scaled(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * scale

    torch.export.save(torch.export.export(Scaled(), (torch.linspace(-1, 1, 6).reshape(2, 3),)), str(path))
    return str(path)


def _same(a: frontend.ImportedModel, b: frontend.ImportedModel) -> None:
    assert a.name == b.name
    tvm.ir.assert_structural_equal(a.mod, b.mod)
    assert len(a.samples) == len(b.samples) == frontend.SAMPLES
    arrays = lambda m: [*m.inputs, *m.reference_outputs, *(x for pair in m.samples for part in pair for x in part)]  # noqa: E731
    for x, y in zip(arrays(a), arrays(b), strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)


def test_a_zoo_model_imported_again_is_read_from_the_cache(cache, monkeypatch):
    first = frontend.load("tiny-mlp")
    [entry] = os.listdir(cache)

    def refuse(source, **kwargs):
        raise AssertionError(f"{source} imported again")

    monkeypatch.setattr(frontend, "_import_named", refuse)
    _same(frontend.load("tiny-mlp"), first)
    with pytest.raises(AssertionError, match="imported again"):  # another seed is another import
        frontend.load("tiny-mlp", seed=1)
    assert os.listdir(cache) == [entry]


def test_a_file_is_known_by_its_contents(cache, tmp_path, monkeypatch):
    first = frontend.load(_pt2(tmp_path / "a.pt2", 2.0))
    os.makedirs(tmp_path / "elsewhere")
    os.rename(tmp_path / "a.pt2", tmp_path / "elsewhere" / "a.pt2")
    calls = []
    real = frontend._import_named
    monkeypatch.setattr(frontend, "_import_named", lambda source, **kw: calls.append(source) or real(source, **kw))
    _same(frontend.load(str(tmp_path / "elsewhere" / "a.pt2")), first)  # moved: the same contents
    assert calls == []
    changed = frontend.load(_pt2(tmp_path / "a.pt2", 3.0))  # the same path, other contents
    assert calls == [str(tmp_path / "a.pt2")]
    np.testing.assert_allclose(changed.reference_outputs[0], 1.5 * first.reference_outputs[0], rtol=1e-6)
    assert len(os.listdir(cache)) == 2


def test_a_damaged_entry_is_imported_again_and_replaced(cache):
    first = frontend.load("tiny-mlp")
    [entry] = os.listdir(cache)
    module = cache / entry / "module.json"
    module.write_text(module.read_text()[:1000])  # cut short
    _same(frontend.load("tiny-mlp"), first)
    assert os.listdir(cache) == [entry] and len(module.read_text()) > 1000


def test_an_empty_cache_folder_setting_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv(import_cache.CACHE_DIR_VARIABLE, "")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    frontend.load("tiny-mlp")
    assert import_cache.folder() is None and os.listdir(tmp_path) == []


def test_the_least_recently_used_entries_go_first_once_the_cache_is_full(cache, monkeypatch):
    frontend.load("tiny-mlp", seed=0)
    frontend.load("tiny-mlp", seed=1)
    [older, newer] = sorted(os.listdir(cache), key=lambda e: os.stat(cache / e).st_mtime)
    os.utime(cache / newer, (1, 1))  # the older one was used last
    one_entry = sum(f.stat().st_size for f in os.scandir(cache / older))
    monkeypatch.setattr(import_cache, "MAX_BYTES", 2 * one_entry)
    frontend.load("tiny-mlp", seed=2)
    assert sorted(os.listdir(cache)) == sorted([older, import_cache.key("tiny-mlp", zoo_model=True,
                                                                        input_shapes=None, seed=2)])


def test_the_program_reads_a_cached_zoo_model_without_importing_pytorch(cache, tmp_path):
    frontend.load("tiny-mlp")
    probe = ("import sys\nfrom tunewise.importing import frontend\nfrom tunewise.tuning import tvm_env\n"
             "tvm_env.import_tvm()\n"
             "frontend.load('tiny-mlp')\nprint('torch' in sys.modules)\n"
             "import torch\nprint(torch.tensor([2.0]).sum().item())")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, import_cache.CACHE_DIR_VARIABLE: str(cache.parent)})
    assert done.stdout.split() == ["False", "2.0"]  # PyTorch stays importable afterwards
