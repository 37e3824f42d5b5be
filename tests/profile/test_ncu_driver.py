from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from kernelloop.profile import diagnose_ncu_failure, find_ncu, ncu_command, parse_ncu_csv
from kernelloop.profile.ncu_driver import DEFAULT_SECTIONS


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_command_filters_the_nvtx_push_pop_range_and_wraps_the_worker(tmp_path):
    worker = [sys.executable, "-m", "kernelloop.evaluate.worker", "--profile"]
    argv = ncu_command(worker, tmp_path / "r.csv", ncu="/opt/ncu")
    assert argv[0] == "/opt/ncu"
    assert _after(argv, "--clock-control") == "none"
    assert "--nvtx" in argv and _after(argv, "--nvtx-include") == "kernelloop_profile/"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--section"] == list(DEFAULT_SECTIONS)
    assert _after(argv, "--page") == "details" and _after(argv, "--print-details") == "all"
    assert _after(argv, "--print-units") == "base" and "--csv" in argv
    assert _after(argv, "--log-file") == str(tmp_path / "r.csv")
    assert "dram__bytes_read.sum" in _after(argv, "--metrics").split(",")
    assert argv[-len(worker) :] == worker


def test_find_ncu_honours_the_environment(tmp_path, monkeypatch):
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("KERNELLOOP_NCU", str(exe))
    assert find_ncu() == exe
    monkeypatch.setenv("KERNELLOOP_NCU", str(tmp_path / "missing"))
    assert find_ncu() is None


def test_known_failures_become_one_sentence_with_the_fix():
    err = diagnose_ncu_failure("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    assert err is not None and "NVreg_RestrictProfilingToAdminUsers=0" in str(err)
    assert "kernelloop_profile" in str(
        diagnose_ncu_failure("==WARNING== No kernels were profiled.")
    )
    assert diagnose_ncu_failure("==PROF== Disconnected from process 1") is None


def test_the_command_runs_end_to_end_through_a_stand_in_ncu(tmp_path, synthetic_text):
    # A stand-in for ncu (no GPU here): it writes a report to --log-file and then runs the
    # wrapped worker argv, so this checks that the argv we build is executable as given.
    fixture = tmp_path / "report.csv"
    fixture.write_text(synthetic_text)
    fake = tmp_path / "ncu"
    fake.write_text(
        "#!/usr/bin/env python3\n"
        "import shutil, subprocess, sys\n"
        "a = sys.argv[1:]\n"
        f"shutil.copy({str(fixture)!r}, a[a.index('--log-file') + 1])\n"
        "i = a.index('--log-file') + 2\n"
        "sys.exit(subprocess.call(a[i:]))\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    marker = tmp_path / "worker_ran"
    worker = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('ok')"]
    out = tmp_path / "out.csv"
    r = subprocess.run(
        ncu_command(worker, out, ncu=fake),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert r.returncode == 0, r.stderr
    assert marker.read_text() == "ok"
    assert [k.name for k in parse_ncu_csv(Path(out).read_text())] == [
        "_fused_rand_kernel",
        "_layernorm_kernel",
    ]
