"""Compile caches managed by the trusted side: one folder per implementation's bytes,
given only to workers that run those bytes (issue 13)."""

from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.launch import compile_cache
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.sandbox import SandboxConfig
from tests.conftest import FLAGSHIP, FUSED


@pytest.fixture
def cache_root(tmp_path):
    compile_cache.use(tmp_path / "cc")
    yield tmp_path / "cc"
    compile_cache.use(None)


def test_each_implementation_gets_only_the_folder_of_its_own_bytes(cache_root, tmp_path):
    work = tmp_path / "work"
    cfg = SandboxConfig(gpu=True, rw_paths=[work], extra_env={"X": "1"})
    a = compile_cache.bind(cfg, b"kernel A")
    a2 = compile_cache.bind(cfg, b"kernel A")
    b = compile_cache.bind(cfg, b"kernel B")
    folder_a = Path(a.extra_env["TRITON_CACHE_DIR"]).parent
    folder_b = Path(b.extra_env["TRITON_CACHE_DIR"]).parent
    assert folder_a != folder_b and folder_a.parent == folder_b.parent == cache_root
    assert a.rw_paths == [work, folder_a] and b.rw_paths == [work, folder_b]  # nothing else
    assert a2.rw_paths == a.rw_paths  # the same bytes, the same folder
    assert cache_root not in a.rw_paths  # never the root: no other implementation's folder
    for key in ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUDA_CACHE_PATH"):
        assert Path(a.extra_env[key]).parent == folder_a
    assert a.extra_env["X"] == "1" and cfg.rw_paths == [work]  # the original is unchanged


def test_the_cpu_interpreter_gets_no_cache(cache_root):
    cfg = SandboxConfig(gpu=False, rw_paths=[])
    assert compile_cache.bind(cfg, b"kernel") is cfg
    assert not cache_root.exists() or not any(cache_root.iterdir())


def test_a_folder_grown_past_the_bound_is_dropped(cache_root, monkeypatch):
    monkeypatch.setattr(compile_cache, "MAX_BYTES", 1000)
    small, big = compile_cache.folder(b"small"), compile_cache.folder(b"big")
    (small / "f").write_bytes(b"x" * 10)
    (big / "f").write_bytes(b"x" * 2000)
    (big / "link").symlink_to(small / "f")  # never followed
    compile_cache.trim(b"small")
    compile_cache.trim(b"big")
    assert (small / "f").exists() and not big.exists()


HOSTILE = """
import os
from pathlib import Path

here = Path(os.environ["TRITON_CACHE_DIR"]).parent
seen = sorted(os.listdir(here.parent))
print("kl-cache-siblings", len(seen), flush=True)
(here / "planted").write_text("mine")  # its own folder is writable
"""


@pytest.mark.gpu
def test_a_candidate_sees_and_writes_only_its_own_cache_on_the_gpu(cache_root, tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text(HOSTILE + FUSED.read_text())
    from kernelloop.task import load_task

    task = load_task(FLAGSHIP)
    theirs = compile_cache.folder((FLAGSHIP / "baseline.py").read_bytes())  # exists already
    rec = evaluate(task, cand, device="cuda", shapes="4096x8000", dtypes=["bfloat16"], screen=False)
    assert rec.verdict.accepted, rec.verdict.reasons
    # its worker saw one folder (its own), not the baseline's beside it
    assert "kl-cache-siblings 1" in rec.worker_log_tail
    mine = compile_cache.folder(cand.read_bytes())
    assert (mine / "planted").read_text() == "mine"
    assert any((mine / "triton").rglob("*.cubin"))  # compiled once, kept for its timing worker
    assert any((theirs / "triton").rglob("*.cubin"))  # the baseline's timing worker's own
    assert not (theirs / "planted").exists()
