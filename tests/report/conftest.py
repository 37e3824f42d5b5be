"""One real measured run of the loop on the CPU, shared by the report tests.

The CPU-native task (plain PyTorch, so its CPU timings count) with three scripted rounds:
the fast kernel (accepted), the float64 one (rejected as slower) and the fast one again
(refused as a copy of the best); two of the task's shapes, one common and one long-tail,
to keep the run short (51 s on an idle 2-core box, ~90 s on a busy one). Tests that change
the records work on a copy.
"""

import shutil
from pathlib import Path

import pytest

from kernelloop.agents.scripted import ScriptedAgent
from kernelloop.history import HistoryStore
from kernelloop.loop import Options, run_loop
from kernelloop.loop.view import RunView
from kernelloop.task import load_task
from tests.busy import history_infra, run_measured
from tests.loop.test_measured_cpu import SCRIPT, _task_and_script

ENTRIES = [SCRIPT[0], SCRIPT[1], SCRIPT[3]]
SHAPES = "512x512,2048x16"


@pytest.fixture(scope="session")
def measured_run(tmp_path_factory) -> tuple[Path, dict]:
    """The run, tried again (bounded, tests/busy.py) while a busy machine loses it."""

    def attempt(_i: int) -> tuple[Path, dict]:
        folder, script = _task_and_script(tmp_path_factory.mktemp("report-run"), ENTRIES)
        summary = run_loop(
            load_task(folder),
            ScriptedAgent(script),
            Options(device="cpu", shapes=SHAPES),
            RunView(live_enabled=False),
        )
        return folder, summary

    return run_measured(attempt, lambda r: history_infra(r[0]), "the report's measured run")


@pytest.fixture
def run_copy(measured_run, tmp_path) -> tuple[Path, HistoryStore]:
    """A copy of the run's task folder (with its history) whose records a test may change."""
    folder = tmp_path / "task"
    shutil.copytree(measured_run[0], folder)
    store = HistoryStore.open(folder / ".kernelloop" / "history.sqlite")
    yield folder, store
    store.close()
