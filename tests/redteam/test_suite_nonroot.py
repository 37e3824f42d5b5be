"""The whole red-team suite once more, its launcher an ordinary user.

CI runs as root; most users do not. The paths differ where it matters (a root launcher
gets a pids cgroup, an ordinary one RLIMIT_NPROC; who may read what outside the sandbox),
so every hostile candidate is run again from uid 54321: the test builds that user's view
of the machine with an outer bubblewrap (see test_sandbox_nonroot.py), drops to the uid
and runs pytest on this folder inside it. Skipped when the suite already runs as an
ordinary user (then the plain run is this one).
"""

from __future__ import annotations

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
from tests.redteam.test_sandbox_nonroot import UID, _outer_argv

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

pytestmark = [
    pytest.mark.skipif(
        platform.machine() != "x86_64", reason="hostile.py uses x86_64 syscall numbers"
    ),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="already an ordinary user: the plain run is this run"
    ),
]

# Inside the outer view, as root: drop to the uid for good, then run the suite.
# argv: uid, scratch folder, checkout root, this folder.
INNER = r"""
import ctypes, os, sys
uid, TMP, ROOT, HERE = int(sys.argv[1]), *sys.argv[2:5]
os.setgroups([]); os.setgid(uid); os.setuid(uid)
libc = ctypes.CDLL(None)
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: no way back to root
libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: as if started as the user (its own /proc files)
os.environ.update(HOME=TMP, TMPDIR=TMP)
os.chdir(ROOT)
sys.path.insert(0, ROOT)
import pytest
print("launcher euid", os.geteuid(), flush=True)
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--basetemp", TMP + "/pt",
                      "--ignore", HERE + "/test_suite_nonroot.py",
                      "--ignore", HERE + "/test_sandbox_nonroot.py", "-rfE", HERE]))
"""


def test_the_red_team_suite_passes_with_an_ordinary_user_launcher():
    bw = bwrap_path()
    assert bw, "bubblewrap is required (apt-get install bubblewrap)"
    need = sorted({Path(os.path.realpath(p)) for p in {*mounts.python_paths(), ROOT}})
    tmp = Path(tempfile.mkdtemp(prefix="kl-nonroot-suite-", dir="/tmp"))
    try:
        os.chown(tmp, UID, UID)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HOME")}
        env["PYTHONPATH"] = str(mounts.PACKAGE_ROOT)
        proc = subprocess.run(
            [*_outer_argv(bw, need), sys.executable, "-c", INNER, str(UID), str(tmp)]
            + [str(ROOT), str(HERE)],
            capture_output=True,
            timeout=1500,
            env=env,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = proc.stdout.decode(errors="replace")
    assert f"launcher euid {UID}" in out, out[-3000:] + proc.stderr.decode(errors="replace")[-2000:]
    assert proc.returncode == 0, out[-6000:]
    assert " passed" in out and " failed" not in out, out[-3000:]
