"""Red team, launcher as an ordinary user: the code path where os.geteuid() != 0.

CI runs as root, and Python may live under /root (0700), where an unprivileged uid
cannot even exec it. So the test builds that user's view itself: an outer bubblewrap
(root, mount namespace only) shows the host's / with a traversable tmpfs over each
directory the user could not enter and the Python installation and this checkout bound
back read-only; inside it, the launcher drops to uid/gid 54321 (a real, unprivileged
kernel uid, not a namespace mapping of 0) and runs the real sandbox on hostile code.
There, no pids cgroup is writable, so the limit on processes is RLIMIT_NPROC, which the
kernel does enforce for a uid other than 0.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kernelloop.sandbox import mounts
from kernelloop.sandbox.bwrap import bwrap_path

UID = 54321
HERE = Path(__file__).resolve().parent
SRC = Path(mounts.PACKAGE_ROOT)

pytestmark = [
    pytest.mark.skipif(
        platform.machine() != "x86_64", reason="hostile.py uses x86_64 syscall numbers"
    ),
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="already an ordinary user: test_sandbox_escape.py covers this path",
    ),
]

# Runs in the outer mount namespace as root, drops to UID, then launches the sandbox.
LAUNCHER = r"""
import json, os, sys
from pathlib import Path
os.setgroups([]); os.setgid(UID); os.setuid(UID)
sys.path.insert(0, SRC)
from kernelloop.sandbox import SandboxConfig, SandboxProcess, run_sandboxed

hostile = Path(HOSTILE).read_bytes()
work, task = Path(WORK) / "work", Path(WORK) / "task"
report = {"launcher_euid": os.geteuid()}

def run(name, *args, **cfg_kw):
    cfg = SandboxConfig(timeout_s=60, rw_paths=[work], ro_paths=[task], **cfg_kw)
    res = run_sandboxed([sys.executable, "-", name, *map(str, args)], work, cfg, stdin=hostile)
    msgs = [json.loads(l) for l in res.stdout.splitlines() if l.startswith(b"{")]
    return (msgs[0] if msgs else None), res

got, res = run("identity")
report.update(identity=got, mode=res.mode, limits=res.limits, warnings=res.warnings,
              stderr=res.stderr[-1500:].decode(errors="replace"))
report["writes"], _ = run(
    "writes", str(task / "reference.py"), str(work / "ok.txt"), "/usr/lib/kl-x"
)
os.environ["OPENAI_API_KEY"] = SECRET
report["secrets"], _ = run("secrets")
sp = SandboxProcess([sys.executable, "-", "forkbomb", "500"], work,
                    SandboxConfig(timeout_s=8, rw_paths=[work], max_processes=64), hostile)
first = next(iter(sp.lines()), b"{}")
bomb = sp.finish()
report.update(bomb=json.loads(first or b"{}"), bomb_limits=bomb.limits)
print(json.dumps(report))
"""


def _outer_argv(bw: str, need: list[Path]) -> list[str]:
    """Host / as is, but every directory the user cannot enter is replaced by a traversable
    tmpfs with only `need` bound back into it."""
    argv = [bw, "--dev-bind", "/", "/", "--die-with-parent"]
    hidden: set[Path] = set()
    for p in need:
        for a in reversed(p.parents):
            if a != Path("/") and not a.stat().st_mode & 0o001:
                hidden.add(a)
                break
    for h in sorted(hidden):
        argv += ["--perms", "0755", "--tmpfs", str(h)]
    made: set[Path] = set()
    for p in sorted(need):
        top = next((h for h in hidden if p.is_relative_to(h)), None)
        if top is None:
            continue
        for a in reversed(p.parents):  # bwrap would make these 0700: make them traversable
            if a.is_relative_to(top) and a != top and a not in made:
                argv += ["--perms", "0755", "--dir", str(a)]
                made.add(a)
        argv += ["--ro-bind", str(p), str(p)]
    return argv


def test_an_ordinary_user_launcher_gets_the_same_sandbox_and_an_rlimit_on_processes():
    bw = bwrap_path()
    assert bw, "bubblewrap is required (apt-get install bubblewrap)"
    need = sorted({Path(os.path.realpath(p)) for p in {*mounts.python_paths(), SRC, HERE}})
    base = Path(tempfile.mkdtemp(prefix="kl-nonroot-", dir="/tmp"))
    try:
        for d in ("work", "task"):
            (base / d).mkdir()
        (base / "task" / "reference.py").write_text("CANARY = 1\n")
        for p in (
            base,
            base / "work",
            base / "task",
            base / "task" / "reference.py",
        ):  # only ro-ness stops it
            os.chown(p, UID, UID)
        secret = "sk-redteam-nonroot-4d2e"
        code = (
            LAUNCHER.replace("UID", str(UID))
            .replace("SRC", repr(str(SRC)))
            .replace("HOSTILE", repr(str(HERE / "hostile.py")))
            .replace("WORK", repr(str(base)))
            .replace("SECRET", repr(secret))
        )
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run(
            [*_outer_argv(bw, need), sys.executable, "-c", code],
            capture_output=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
        report = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert report["launcher_euid"] == UID
    assert report["mode"] == "bwrap" and report["identity"] is not None, report["stderr"]
    ident = report["identity"]
    assert ident["uid"] == 65534 and int(ident["cap_eff"], 16) == 0 and ident["seccomp"] == "2"
    assert report["writes"][str(base / "task" / "reference.py")] == "EROFS"
    assert report["writes"]["/usr/lib/kl-x"] == "EROFS"
    assert report["writes"][str(base / "work" / "ok.txt")] == "written"
    assert secret not in json.dumps(report["secrets"])
    # No writable pids cgroup for this user: the limit is RLIMIT_NPROC, and it holds.
    assert report["bomb_limits"]["processes"].startswith("RLIMIT_NPROC"), report["bomb_limits"]
    assert report["bomb"]["error"] == "EAGAIN" and report["bomb"]["forked"] < 64, report["bomb"]
    assert report["limits"]["memory"].startswith("none")  # recorded, not hidden
