"""A run's row names its owner (pid, host) and carries a heartbeat, so a live run is told
from a crashed one: while a real `kernelloop run` works, `--resume`, a second run of the
same task and the MCP server's session all refuse; once it is SIGKILLed, the history
reads it as crashed at once (tests/loop/test_kill_resume.py then resumes such a run)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kernelloop.errors import KernelloopError
from kernelloop.history import HistoryStore
from kernelloop.history.liveness import liveness
from kernelloop.loop.session import ExternalSession
from kernelloop.loop.state import Options
from kernelloop.task import load_task
from tests import busy
from tests.conftest import FUSED
from tests.loop.test_kill_resume import FAST, _killpg, _logs, _rows, _start
from tests.loop.test_run import FAST as FAST_OPTS
from tests.loop.test_run import _task_copy

CLAIMED_WITHIN_S = 200  # the baseline's evaluation and profile come first


def _claimed(folder, first, log) -> None:
    """Wait until the live run owns its row (heartbeat set, status running)."""
    deadline = time.monotonic() + CLAIMED_WITHIN_S
    while not _rows(folder, "SELECT id FROM runs WHERE owner_pid = ? AND heartbeat_at IS NOT "
                            "NULL AND status = 'running'", (first.pid,)):  # fmt: skip
        assert first.poll() is None, f"the run ended early\n{_logs(log)}"
        assert time.monotonic() < deadline, f"no owned run row\n{_logs(log)}"
        time.sleep(0.2)


LAUNCH = """    _fused_kernel[(rows,)](
        x, residual, weight, bias, out, cols, eps, p, seed, BLOCK=block, num_warps=warps
    )
"""


def _slow_script(folder) -> str:
    """A scripted folder whose one idea is the fused kernel launched 1000 times per call
    (the same output each time): correct, and minutes to judge under Triton's interpreter,
    so the run stays live while it is asked. The flagship's own script ended (39 s in all,
    two busy processes beside it, 2026-12-03) before the three checks did."""
    src = (folder / "scripted" / "01_fused_naive.py").read_text()
    assert src.count(LAUNCH) == 1, "the flagship's fused launch changed: update LAUNCH"
    looped = "    for _ in range(1000):  # slow on purpose\n" + "".join(
        "    " + line for line in LAUNCH.splitlines(keepends=True)
    )
    slow = folder.parent / "slow"
    slow.mkdir()
    (slow / "01_slow.py").write_text(src.replace(LAUNCH, looped))
    (slow / "01_slow.toml").write_text('hypothesis = "The fused kernel, launched 1000 times."\n')
    return f"scripted:{slow}"


def test_a_live_run_is_not_resumed_or_joined_and_its_crash_is_seen(tmp_path):
    for i in range(busy.TRIES):
        folder = _task_copy(tmp_path / f"try{i}")
        log = tmp_path / f"live{i}"
        cmd = [sys.executable, "-m", "kernelloop.cli", "run", str(folder),
               "--agent", _slow_script(folder), *FAST]  # fmt: skip
        first = _start(cmd, log)
        try:
            _claimed(folder, first, log)
            resume = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=120)
            if first.poll() is not None and busy.BUSY in _logs(log):
                # The run ended before it could be asked: its baseline refused on a busy
                # machine. Nothing about liveness was shown; try again (bounded).
                busy.wait_for_quiet()
                continue
            why = f"{resume.stderr[-2000:]}\nthe live run: rc {first.poll()}\n{_logs(log)}"
            assert resume.returncode == 2, why
            assert "still live" in resume.stderr and f"pid {first.pid}" in resume.stderr, why
            second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert second.returncode == 2 and "still live" in second.stderr, second.stderr[-2000:]
            session = ExternalSession(load_task(folder), Options(device="cpu", **FAST_OPTS))
            try:
                with pytest.raises(KernelloopError, match="still live"):
                    session.submit(FUSED.read_text(), "Fuse the three kernels.", "")
            finally:
                session.close()
            assert first.poll() is None, _logs(log)  # none of them disturbed the live run
            break
        finally:
            _killpg(first)
            first.wait(timeout=30)
    else:
        pytest.skip(f"the live run's baseline was refused on a busy machine {busy.TRIES} times")
    task = load_task(folder)
    with HistoryStore.open(folder / ".kernelloop" / "history.sqlite") as store:
        [run] = store.unfinished_runs(task.name)
        crashed = liveness(run)
        assert not crashed.live and f"pid {first.pid}" in crashed.why and "gone" in crashed.why
        assert len(store.runs(task.name)) == 1  # the refused second run never started one
