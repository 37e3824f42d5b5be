"""Kernel compile caches the trusted side manages: one folder per implementation's bytes.

A sandboxed worker used to start with an empty, private Triton cache, so the correctness
worker, the candidate's timing worker and the baseline's timing worker each compiled the
same kernels again, in every evaluation. Here every implementation gets a cache folder
named by the SHA-256 of its source bytes, under a root that lives as long as the run (the
loop's scratch folder, or a temporary folder removed when the process exits). A worker is
given, read-write, only the folder of the one implementation whose code it runs
(`TRITON_CACHE_DIR`, `TORCH_EXTENSIONS_DIR`, `CUDA_CACHE_PATH` point into it): the baseline's
timing worker reuses what an earlier baseline worker compiled, the candidate's timing worker
what its own correctness worker compiled.

Why this is safe with hostile candidates: a candidate can write only the folder of its own
bytes. Whatever it plants there (any file, under any cache key) is read only by workers
that run the very same bytes, which could do the same thing themselves; no other
implementation's folder (the best's, the baseline's) is ever mounted where candidate code
runs, so nothing a later candidate does changes what an earlier one compiled to. The
trusted side never reads a cache; it only removes a folder that grew past `MAX_BYTES`
(without following links), and links a folder's regular files into a warm worker's
folder when that worker gets the same bytes (`adopt`). On the CPU (the Triton
interpreter) nothing compiles and no folder is given, except to C++ candidates
(`language = "cuda"`), whose extensions build there too.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from kernelloop.sandbox import SandboxConfig

MAX_BYTES = 512 << 20  # a folder larger than this is dropped after its worker ends

_lock = threading.Lock()
_root: Path | None = None


def use(path: Path | None) -> None:
    """Keep caches under `path`; None (the default): a temporary folder of this process
    (one `kernelloop run`, one MCP session, one command), made on first use and removed
    at exit."""
    global _root
    with _lock:
        _root = Path(path) if path is not None else None


def root() -> Path:
    global _root
    with _lock:
        if _root is None:
            _root = Path(tempfile.mkdtemp())  # no "kernelloop" in a worker's environment
            atexit.register(shutil.rmtree, _root, True)
        _root.mkdir(parents=True, exist_ok=True)
        return _root


def folder(source: bytes) -> Path:
    """The cache folder of the implementation whose source is `source` (made if missing)."""
    path = root() / hashlib.sha256(source).hexdigest()[:32]
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def bind(cfg: SandboxConfig, source: bytes, native: bool = False) -> SandboxConfig:
    """`cfg` for a worker that runs the implementation `source` (and no other one): its
    cache folder read-write, and the compilers pointed at it. Unchanged on the CPU, unless
    `native` (a C++ candidate, `language = "cuda"`, builds its extension there too: the
    correctness workers and its timing worker then share one build instead of compiling it
    each — torch's build lock makes a second worker wait for the first)."""
    if not (cfg.gpu or native):
        return cfg
    return _bind(cfg, folder(source))


def bind_pending(cfg: SandboxConfig, native: bool = False) -> tuple[SandboxConfig, Path | None]:
    """`cfg` for a correctness worker started before its candidate exists
    (trusted/launch/prestart.py): a fresh, empty folder of its own where `bind` would give the
    candidate's, and that folder (None where `bind` gives none). `adopt` names it after
    the candidate once its bytes are known."""
    if not (cfg.gpu or native):
        return cfg, None
    path = Path(tempfile.mkdtemp(prefix="pending-", dir=root()))
    return _bind(cfg, path), path


def adopt(pending: Path, source: bytes) -> bool:
    """Make `pending` (bound to a worker that has run no implementation's code yet) the
    folder of `source`'s bytes: renamed, so the worker's mount follows it and a later
    worker of the same bytes (its timing worker) finds what it compiled. False where the
    bytes already have a folder (kept as it is; `pending` is then this worker's alone and
    removed after it, and gets hard links to that folder's files: the same bytes' compiles,
    so a warm worker of bytes judged before compiles no more than a fresh one would)."""
    target = root() / hashlib.sha256(source).hexdigest()[:32]
    with _lock:
        if not target.exists():
            os.rename(pending, target)
            return True
    _link_files(target, pending)
    return False


LINK_LIMIT = 10_000  # files linked from an existing folder into a warm worker's


def _link_files(src: Path, dst: Path) -> None:
    """Hard links in `dst` to the regular files of `src` (same bytes' folders: what the
    earlier workers of these bytes compiled, found by the warm worker as a fresh worker
    bound to `src` would find it). Nothing is read or followed: directories are walked
    without following links, and anything but a directory or a regular file is skipped."""
    linked = 0
    for dirpath, dirs, files in os.walk(src, followlinks=False):
        rel = Path(dirpath).relative_to(src)
        for d in dirs:
            (dst / rel / d).mkdir(mode=0o700, exist_ok=True)
        for f in files:
            if linked >= LINK_LIMIT:
                return
            path = os.path.join(dirpath, f)
            try:
                if stat.S_ISREG(os.lstat(path).st_mode):
                    os.link(path, dst / rel / f, follow_symlinks=False)
                    linked += 1
            except OSError:
                continue


def _bind(cfg: SandboxConfig, path: Path) -> SandboxConfig:
    env = {
        **cfg.extra_env,
        "TRITON_CACHE_DIR": str(path / "triton"),
        "TORCH_EXTENSIONS_DIR": str(path / "torch_extensions"),
        "CUDA_CACHE_PATH": str(path / "nv"),
    }
    return replace(cfg, rw_paths=[*cfg.rw_paths, path], extra_env=env)


def bind_compiled(cfg: SandboxConfig, source: bytes) -> SandboxConfig:
    """`cfg` for the benchmark's "compiled" slot, which runs the reference `source` under
    torch.compile: a folder of its own for inductor's and Triton's caches (also on the
    CPU, where inductor compiles C++), and no compile worker pool.

    The folder is keyed by the reference's bytes under a name no implementation's folder
    can have (`compiled-…`), and only compiled slots are given it: they run trusted code
    alone (the reference, the input generator), so a later benchmark of the same task
    reuses their compiles (a cold inductor compile took 20–30 s on the 2-core CPU runner,
    a warm one 2–6 s). A candidate whose bytes equal the reference's gets the plain folder
    of those bytes, never this one."""
    path = root() / f"compiled-{hashlib.sha256(source).hexdigest()[:32]}"
    path.mkdir(mode=0o700, exist_ok=True)
    env = {
        **cfg.extra_env,
        "TORCHINDUCTOR_CACHE_DIR": str(path / "inductor"),
        "TRITON_CACHE_DIR": str(path / "triton"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",  # compile in-process: no pool of workers
    }
    if cfg.gpu:
        env["CUDA_CACHE_PATH"] = str(path / "nv")
    return replace(cfg, rw_paths=[*cfg.rw_paths, path], extra_env=env)


def trim(source: bytes) -> None:
    """Drop the folder of `source` if it grew past MAX_BYTES (a candidate filling it)."""
    path = root() / hashlib.sha256(source).hexdigest()[:32]
    total = 0
    for dirpath, _dirs, files in os.walk(path, followlinks=False):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                continue
    if total > MAX_BYTES:
        shutil.rmtree(path, ignore_errors=True)
