"""bubblewrap's command line for one worker: what it may see (mounts.py's plan: Python,
the task's folders read-only, its own scratch, the GPU's device nodes where it has one),
its scrubbed environment, the seccomp filter and a synthetic passwd/group, handed over as
memfds bwrap inherits."""

from __future__ import annotations

import os
from pathlib import Path

from kernelloop.sandbox import mounts, seccomp
from kernelloop.sandbox.bwrap import BASE_FLAGS, SANDBOX_UID, bwrap_path
from kernelloop.sandbox.config import SANDBOX_HOME, SANDBOX_TMP, SandboxConfig, scrubbed_env

_PASSWD = (
    f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
    f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:{SANDBOX_HOME}:/usr/sbin/nologin\n"
)
_GROUP = f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\n"


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(f"kernelloop-{name}", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bwrap_command(
    argv: list[str], cfg: SandboxConfig, marker: str
) -> tuple[list[str], dict[str, str], list[int]]:
    """(bwrap's argv, the worker's environment, the memfds bwrap must inherit)."""
    gpu_index = cfg.resolved_gpu_index()
    ro = {*mounts.python_paths(), *(Path(p) for p in cfg.ro_paths)}
    if gpu_index is not None:
        ro |= mounts.gpu_paths()
    if argv and (prog := mounts.program_path(argv[0], os.environ.get("PATH", os.defpath))):
        ro.add(prog)
    scratch = {
        SANDBOX_TMP: cfg.scratch_bytes,
        Path("/dev/shm"): cfg.scratch_bytes,
        SANDBOX_HOME: cfg.scratch_bytes,
    }
    plan = mounts.plan(
        ro=ro,
        rw=[Path(p) for p in cfg.rw_paths],
        hidden=[Path(p) for p in cfg.hidden_paths],
        gpu_index=gpu_index,
        scratch=scratch,
    )
    seen = mounts.bound_dirs(plan)
    env = scrubbed_env(
        SANDBOX_HOME,
        SANDBOX_TMP,
        marker,
        cfg.extra_env,
        keep_path=lambda p: p.exists() and any(p.is_relative_to(v) for v in seen),
    )
    if gpu_index is not None:
        env.update(
            CUDA_VISIBLE_DEVICES=mounts.gpu_nodes(gpu_index)[1], CUDA_DEVICE_ORDER="PCI_BUS_ID"
        )
    fds = [seccomp.filter_fd(cfg.seccomp_profile)]
    try:
        full = [
            bwrap_path() or "bwrap",
            *BASE_FLAGS,
            "--seccomp",
            str(fds[0]),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        # A synthetic passwd/group: names for the sandbox's ids, nothing about the host's users.
        for name, text in (("passwd", _PASSWD), ("group", _GROUP)):
            fds.append(_memfd(name, text.encode()))
            full += ["--ro-bind-data", str(fds[-1]), f"/etc/{name}"]
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    for m in plan:
        full += m.argv()
    # The new root is bwrap's own tmpfs, writable and of no fixed size: make it read-only
    # (not recursive: the scratch tmpfs and the rw binds keep their own flags).
    full += ["--remount-ro", "/", "--chdir", str(SANDBOX_TMP), "--", *argv]
    return full, env, fds
