"""bubblewrap without privileges, whoever launches it, and the choice of mode.

The worker runs in new user, mount, pid, network, ipc, uts and cgroup namespaces as uid
and gid 65534 with every capability dropped, cannot create user namespaces, dies with
its launcher, has its own session (no terminal to inject into), and runs under the
seccomp filter of seccomp.py. Nothing falls back silently: `auto` means bubblewrap, and
where bubblewrap cannot start the error says how to fix that; an unsandboxed worker is
only ever the explicit `none`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from kernelloop.errors import SandboxError
from kernelloop.sandbox import seccomp
from kernelloop.sandbox.config import MODES

SANDBOX_UID = 65534
BASE_FLAGS = [
    "--unshare-all",
    "--unshare-user",
    "--uid",
    str(SANDBOX_UID),
    "--gid",
    str(SANDBOX_UID),
    "--cap-drop",
    "ALL",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--hostname",
    "sandbox",
]


def bwrap_path() -> str | None:
    override = os.environ.get("KERNELLOOP_BWRAP")
    if override and Path(override).is_file():
        return override
    return shutil.which("bwrap")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def diagnose(stderr: str) -> str:
    """One sentence: why bubblewrap could not start, and the fix."""
    err = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0" and os.geteuid() != 0:
        return (
            "bubblewrap cannot create a user namespace: unprivileged user namespaces are off "
            "(run `sysctl -w kernel.unprivileged_userns_clone=1`) or pass --sandbox none."
        )
    if _read("/proc/sys/user/max_user_namespaces") == "0":
        return (
            "bubblewrap cannot create a user namespace: user.max_user_namespaces is 0 "
            "(run `sysctl -w user.max_user_namespaces=15000`) or pass --sandbox none."
        )
    if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" and os.geteuid() != 0:
        return (
            "bubblewrap cannot create a user namespace: AppArmor restricts them (Ubuntu 23.10+); "
            "run `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or pass --sandbox "
            "none."
        )
    if "proc" in err.lower() and "mount" in err.lower():
        return (
            f"bubblewrap cannot mount /proc in its namespace ({err}): the container masks parts of "
            "/proc; start it with `docker run --security-opt systempaths=unconfined` (or run "
            "kernelloop outside it), or pass --sandbox none."
        )
    if any(
        s in err for s in ("namespace", "uid map", "Operation not permitted", "Permission denied")
    ):
        seccomp_on = "Seccomp:\t2" in (_read("/proc/self/status") or "")
        hint = (
            "the container's seccomp profile blocks namespaces; start it with "
            "`docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined`"
            if seccomp_on
            else "allow user namespaces here (`sysctl -w user.max_user_namespaces=15000`, and in a "
            "container `docker run --security-opt seccomp=unconfined --security-opt "
            "apparmor=unconfined`)"
        )
        return f"bubblewrap cannot create its namespaces ({err}): {hint}, or pass --sandbox none."
    return (
        f"bubblewrap cannot start here ({err}); fix that, or pass --sandbox none to run "
        "candidates unsandboxed."
    )


def probe(bw: str) -> str | None:
    """None when bwrap starts with every flag the sandbox uses; else the fix, in one sentence."""
    seccomp.check_available()
    true = shutil.which("true") or "/bin/true"
    fd = seccomp.filter_fd("worker")
    argv = [bw, *BASE_FLAGS, "--seccomp", str(fd), "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        p = Path("/") / name
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            argv += ["--ro-bind", str(p), str(p)]
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(1 << 20),
        "--tmpfs",
        "/tmp",
        "--",
        true,
    ]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30, pass_fds=[fd])
    except (OSError, subprocess.TimeoutExpired) as e:
        return diagnose(str(e))
    finally:
        os.close(fd)
    return None if res.returncode == 0 else diagnose(res.stderr)


_MODE_CACHE: dict[str, str] = {}


def detect_mode(requested: str = "auto") -> str:
    """The mode a sandbox will run in: `bwrap` (for auto too) or an explicit `none`.

    Raises SandboxError, with the fix, when bubblewrap cannot start; never falls back."""
    if requested == "none":
        return "none"
    if requested == "unshare":
        raise SandboxError(
            "the `unshare` sandbox mode was removed (it gave no filesystem isolation); "
            "use --sandbox bwrap (apt-get install bubblewrap) or, knowingly, --sandbox none."
        )
    if requested not in MODES:
        raise SandboxError(f"unknown sandbox mode {requested!r}; use one of {', '.join(MODES)}.")
    if "bwrap" in _MODE_CACHE:
        return "bwrap"
    bw = bwrap_path()
    if not bw:
        raise SandboxError(
            "bubblewrap is not installed; install it (apt-get install bubblewrap) "
            "or pass --sandbox none to run candidates unsandboxed."
        )
    problem = probe(bw)
    if problem:
        raise SandboxError(problem)
    _MODE_CACHE["bwrap"] = "bwrap"
    return "bwrap"
