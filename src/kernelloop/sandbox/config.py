"""What a caller asks of the sandbox, what it gets back, and the worker's environment."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Variables passed to the worker; everything else (API keys, tokens, proxies) is dropped.
ENV_ALLOW = (
    "PATH",
    "PYTHONPATH",
    "LANG",
    "LC_ALL",
    "TERM",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "NVIDIA_DRIVER_CAPABILITIES",
    "TRITON_PTXAS_PATH",
    "TRITON_LIBCUDA_PATH",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)
# Never passed, even through extra_env: secrets and ways out.
_NEVER_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_PROXY")
MARKER = "KERNELLOOP_SANDBOX_ID"
MODES = ("auto", "bwrap", "none")

# Inside bubblewrap: a private home and tmp (size-capped tmpfs, gone with the sandbox).
SANDBOX_HOME = Path("/home/sandbox")
SANDBOX_TMP = Path("/tmp")


@dataclass
class SandboxResult:
    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    wall_s: float
    mode: str
    stray_killed: int = 0
    # How each resource was bounded, or why it was not ("processes": "cgroup v1 pids.max=256").
    limits: dict[str, str] = field(default_factory=dict)
    # What could not be enforced, in words (also in `limits`); empty when everything held.
    warnings: list[str] = field(default_factory=list)
    # The channel was cut short: a line longer than max_line_bytes, or more than
    # max_stdout_bytes in all. The caller turns this into a `protocol` rejection.
    protocol: str | None = None
    stderr_dropped: int = 0  # bytes of stderr not kept (only the last stderr_keep_bytes are)
    stopped: bool = False  # the launcher ended the worker early on purpose (SandboxProcess.stop)


@dataclass
class SandboxConfig:
    mode: str = "auto"  # auto (= bwrap) | bwrap | none
    timeout_s: float = 600.0
    gpu: bool = False
    # The GPU the worker may use (nvidia-smi's index, PCI bus order); None = 0 when gpu.
    gpu_index: int | None = None
    max_file_bytes: int = 1 << 30  # RLIMIT_FSIZE: the largest file the worker can write
    max_open_files: int = 4096
    max_processes: int = (
        1024  # tasks (threads count) in the sandbox: cgroup pids.max or RLIMIT_NPROC
    )
    # Memory cgroup cap on everything in the sandbox, tmpfs pages included; None = 3/4 of
    # the machine's memory, 0 = no cap. Never RLIMIT_AS (CUDA reserves huge ranges).
    max_memory_bytes: int | None = None
    scratch_bytes: int = 1 << 30  # size of each private tmpfs: /tmp, /dev/shm, $HOME
    stderr_keep_bytes: int = 64 << 10  # the tail of stderr kept in the result
    max_line_bytes: int = 16 << 20  # longest channel line accepted
    max_stdout_bytes: int = 1 << 30  # channel bytes accepted in all
    seccomp_profile: str = "worker"  # a name in seccomp.PROFILES; "profile" for Nsight Compute
    ro_paths: list[Path] = field(default_factory=list)
    rw_paths: list[Path] = field(default_factory=list)
    hidden_paths: list[Path] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)

    def resolved_gpu_index(self) -> int | None:
        if not self.gpu:
            return None
        return 0 if self.gpu_index is None else self.gpu_index


def _secret_name(name: str) -> bool:
    up = name.upper()
    return up.endswith(_NEVER_SUFFIXES) or up in {
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
    }


def scrubbed_env(
    home: Path,
    tmp: Path,
    marker: str,
    extra: dict[str, str],
    keep_path: Callable[[Path], bool] = lambda _p: True,
) -> dict[str, str]:
    """The worker's whole environment: the allow-list, private caches, the marker.

    `keep_path(dir)` says whether a PYTHONPATH entry is visible in the sandbox; the
    others are dropped (they would only fail, or name a host path for nothing)."""
    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    # The interpreter's own bin folder first: tools installed beside it (the `ninja` that
    # torch's C++ extension builds call by name) are found in an unactivated venv too.
    bindir = str(Path(sys.executable).parent)
    path = env.get("PATH", os.defpath).split(os.pathsep)
    env["PATH"] = os.pathsep.join([bindir, *[p for p in path if p and p != bindir]])
    if "PYTHONPATH" in env:
        kept = [
            p
            for p in env["PYTHONPATH"].split(os.pathsep)
            if p and Path(p).is_absolute() and keep_path(Path(p))
        ]
        if kept:
            env["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            del env["PYTHONPATH"]
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        TRITON_CACHE_DIR=str(home / "triton-cache"),
        TORCHINDUCTOR_CACHE_DIR=str(home / "inductor-cache"),
        CUDA_CACHE_PATH=str(home / "nv-cache"),
        XDG_CACHE_HOME=str(home / "cache"),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        PYTHONHASHSEED="0",
        **{MARKER: marker},
    )
    env.update({k: v for k, v in extra.items() if not _secret_name(k)})
    return env
