"""Several ideas per round: every candidate of a round is recorded first, judged against
the round's starting best, and the best accepted one promoted at the round's end; a run
killed anywhere in a round resumes without recording anything twice.

Real parts: sandboxed evaluations of the CPU-native task (plain PyTorch, so its CPU
timings count and the gate promotes), the flagship under Triton's interpreter, SQLite
histories and git repositories in temp dirs. The "kill" is an exception no handler
catches, raised at the step under test, so the process state is what a SIGKILL there
would leave (tests/loop/test_kill_resume.py does it with a real SIGKILL)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.agents.scripted import ScriptedAgent
from kernelloop.cli import app
from kernelloop.executor import InTurn
from kernelloop.gate import GateResult
from kernelloop.history import HistoryStore, open_task_memory
from kernelloop.loop import Options, run_loop
from kernelloop.loop import round as loop_round
from kernelloop.loop.promotion import decide_round
from kernelloop.loop.view import RunView
from kernelloop.report.records import read_run
from kernelloop.report.sections import rounds
from kernelloop.task import load_task
from tests.busy import history_infra, run_measured
from tests.conftest import FUSED
from tests.history.records import make_record
from tests.loop.test_measured_cpu import _task_and_script
from tests.loop.test_run import FAST, _task_copy, _write_candidates

SLOW = ("01_slow.py", "slow.py", "Float64 throughout with a second mean-square pass for safety.")
FAST_ = ("02_fast.py", "fast.py", "Whole-tensor fp32 instead of float64 row chunks, with FMAs.")


ONE = "256x1024"  # one common shape of the CPU task: a quicker benchmark, the same verdicts


def _cpu_task(tmp_path: Path, scripted: list, approvals: bool = True) -> tuple[Path, Path]:
    """The CPU task and a script. Its gate keeps min_gain (2%) but not the noise margin:
    on this shared 2-core machine another test's load once put the noise at 194% and
    rejected fast.py at 2.4x; these tests are about rounds, and fast.py (2.2-2.4x) and
    slow.py (about 0.5x the baseline at 256x1024; its first version was 0.82x there, one
    thread, and the noise once promoted it) are far apart."""
    folder, script = _task_and_script(tmp_path, scripted)
    toml = folder / "task.toml"
    text = toml.read_text().replace("noise_k = 3.0", "noise_k = 0.0")
    assert "noise_k = 0.0" in text
    if not approvals:  # no sign-off needed: the git best moves with the winner
        text = text.replace("[rules]\n", "[rules]\napprovals_for_new_arch = 0\n")
    toml.write_text(text)
    return folder, script


def measured_round(tmp_path: Path, scripted: list, run, approvals: bool = True):
    """`run(task, script)` on a fresh copy of the CPU task (`_cpu_task`) per try, tried
    again (bounded, tests/busy.py) while a busy machine loses a timing: a baseline refused
    or a candidate's benchmark recorded as an infrastructure fault for BUSY. Returns
    (task, what `run` returned)."""

    def attempt(i: int):
        folder, script = _cpu_task(tmp_path / f"try{i}", scripted, approvals)
        task = load_task(folder)
        return folder, task, run(task, script)

    _, task, got = run_measured(attempt, lambda r: history_infra(r[0]), "the round")
    return task, got


class Killed(BaseException):
    """The process dies here: nothing catches it, as nothing outlives a SIGKILL."""


def _rows(task, sql: str) -> list[dict]:
    store, _ = open_task_memory(task)
    with store:
        return [dict(r) for r in store._conn.execute(sql)]


def _git_best(task) -> str:
    _, versions = open_task_memory(task)
    ref = f"refs/heads/kernelloop/{versions.task}/best"
    return subprocess.run(
        ["git", "-C", str(versions.repo), "rev-parse", ref], capture_output=True, text=True
    ).stdout.strip()


def _check_round_one_once(task, summary: dict, approved: bool = False) -> None:
    """Round 1's two candidates each recorded once with one verdict, both against the
    baseline; the faster one (proposed second) promoted once; the round closed once."""
    props = _rows(
        task,
        "SELECT p.*, (SELECT COUNT(*) FROM evaluations e WHERE e.proposal_id = p.id) n_eval "
        "FROM proposals p ORDER BY p.id",
    )
    base, slow, fast = props
    assert [(p["round"], p["k"]) for p in props] == [(0, 1), (1, 1), (1, 2)]
    assert [p["n_eval"] for p in props] == [1, 1, 1]
    assert slow["parent_id"] == fast["parent_id"] == base["id"]  # the round's starting best
    evals = {r["proposal_id"]: r for r in _rows(task, "SELECT * FROM evaluations")}
    assert evals[fast["id"]]["accepted"] == 1, evals[fast["id"]]["reasons_json"]
    assert evals[slow["id"]]["accepted"] == 0 and evals[slow["id"]]["category"] == "slower"
    changes = _rows(task, "SELECT proposal_id, pending_approval FROM best_changes ORDER BY id")
    assert [c["proposal_id"] for c in changes] == [base["id"], fast["id"]]
    # A first best on an architecture without approvals waits for one (rules default):
    # recorded once as pending, and the git best stays the baseline until approved.
    assert changes[1]["pending_approval"] == (0 if approved else 1)
    [r1] = _rows(task, "SELECT * FROM rounds WHERE round = 1")
    assert r1["finished_at"]
    assert summary["best_proposal_id"] == fast["id"] and summary["status"] == "finished"
    assert _git_best(task) == (fast if approved else base)["commit_sha"]


class _Recording(InTurn):
    """InTurn that keeps each job's round references (refcache.References)."""

    def __init__(self) -> None:
        super().__init__()
        self.references: list = []

    def submit(self, job):
        self.references.append(job.references)
        return super().submit(job)


def test_two_candidates_are_judged_in_one_round_and_the_better_one_promoted(tmp_path):
    def run(task, script):
        agent, executor = ScriptedAgent(script, per_round=2), _Recording()
        opts = Options(device="cpu", shapes=ONE, rounds=1, executor=executor)
        return agent, executor, run_loop(task, agent, opts, RunView(live_enabled=False))

    task, (agent, executor, summary) = measured_round(tmp_path, [SLOW, FAST_], run)
    folder = task.folder
    _check_round_one_once(task, summary)
    assert executor.ran == ["baseline", "r1_1", "r1_2"]  # every evaluation through the executor
    # The round's candidates shared its seeds and references: the second candidate found
    # every reference the first one computed (more hits than references computed).
    base_refs, r1, r2 = executor.references
    assert base_refs is None and r1 is r2 is not None
    st = r1.stats()
    assert st["misses"] == st["kept"] > 0 and st["hits"] > st["misses"], st
    # The agent heard both verdicts of the round.
    told = {p.hypothesis: o for p, o in agent.outcomes}
    assert told[SLOW[2]].startswith("rejected") and told[FAST_[2]].startswith("promoted")
    # The history and the report show the round's two candidates side by side.
    out = CliRunner().invoke(app, ["history", str(folder)], terminal_width=250)
    assert out.exit_code == 0, out.output
    assert "r1-1" in out.output and "r1-2" in out.output and "★" in out.output
    store, _ = open_task_memory(task)
    with store:
        rr = read_run(store, task.name)
    [r1] = rounds(rr)
    assert r1["round"] == 1 and len(r1["candidates"]) == 2
    assert r1["candidates"][0].startswith("r1-1") and "rejected" in r1["candidates"][0]
    assert r1["candidates"][1].startswith("r1-2") and "promoted" in r1["candidates"][1]
    assert r1["candidates"][1].endswith("★")


class _DiesOnJob(InTurn):
    """In turn, but the process dies as the named job is handed over."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def submit(self, job):
        if job.name == self.name:
            raise Killed(f"killed while {job.name} was being evaluated")
        return super().submit(job)


@pytest.mark.parametrize("kill", ["mid-judging", "before-promotion", "after-promotion"])
def test_a_round_killed_anywhere_resumes_without_recording_twice(tmp_path, monkeypatch, kill):
    real_promote, real_finish = loop_round.promote, HistoryStore.finish_round

    def arm() -> Options:
        """The run's options, with the kill armed where this case puts it."""
        opts = Options(device="cpu", shapes=ONE, rounds=1)
        if kill == "mid-judging":  # r1_1 recorded, r1_2 recorded and versioned, not evaluated
            opts.executor = _DiesOnJob("r1_2")
        elif kill == "before-promotion":  # both verdicts recorded, no winner yet

            def promote(*a, **kw):
                monkeypatch.setattr(loop_round, "promote", real_promote)
                raise Killed("killed before the round's winner was recorded")

            monkeypatch.setattr(loop_round, "promote", promote)
        else:  # the winner recorded as best, the round not yet closed

            def finish_round(self, run_id, r, note=""):
                if r == 1:
                    monkeypatch.setattr(HistoryStore, "finish_round", real_finish)
                    raise Killed("killed before the round was closed")
                return real_finish(self, run_id, r, note)

            monkeypatch.setattr(HistoryStore, "finish_round", finish_round)
        return opts

    def run(task, script) -> dict:
        """Killed, then resumed; what the history held between the two."""
        seen = {}
        try:
            run_loop(task, ScriptedAgent(script, per_round=2), arm(), RunView(live_enabled=False))
        except Killed:
            seen["killed"] = True
        finally:  # a try lost to a busy machine may end before the kill fired
            monkeypatch.setattr(loop_round, "promote", real_promote)
            monkeypatch.setattr(HistoryStore, "finish_round", real_finish)
        seen["runs"] = _rows(task, "SELECT * FROM runs")
        seen["closed"] = _rows(
            task, "SELECT * FROM rounds WHERE round = 1 AND finished_at IS NOT NULL"
        )
        seen["n_evals"] = len(_rows(task, "SELECT * FROM evaluations"))
        if not seen.get("killed"):
            return seen
        seen["executor"] = InTurn()
        seen["summary"] = run_loop(
            task,
            ScriptedAgent(script, per_round=2),
            Options(device="cpu", shapes=ONE, rounds=1, resume=True, executor=seen["executor"]),
            RunView(live_enabled=False),
        )
        return seen

    task, seen = measured_round(tmp_path, [SLOW, FAST_], run, approvals=False)
    assert seen.get("killed"), seen
    [first] = seen["runs"]
    assert first["status"] == "running"
    assert not seen["closed"]
    assert seen["n_evals"] == {"mid-judging": 2, "before-promotion": 3, "after-promotion": 3}[kill]
    _check_round_one_once(task, seen["summary"], approved=True)
    # Only what had no verdict was evaluated again.
    assert seen["executor"].ran == (["r1_2"] if kill == "mid-judging" else [])
    [r1] = _rows(task, "SELECT * FROM rounds WHERE round = 1")
    assert r1["note"] == "resumed"


def test_the_round_promotes_the_largest_gain_and_the_earlier_candidate_on_a_tie(tmp_path):
    """The decision alone, on a real SQLite history: three accepted candidates of one
    round and a rejected one with a larger claimed objective."""
    task = load_task(FUSED.parents[1])
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        run = store.start_run(task.name, "d", "tuner", "cpu", "cpu", "{}")
        base = store.add_proposal(run, 0, source="b", hypothesis="baseline")
        gains = [(1.10, True), (1.25, True), (1.25, True), (1.40, False)]
        ids = []
        for k, (g, ok) in enumerate(gains, start=1):
            pid = store.add_proposal(
                run, 1, source=f"s{k}", hypothesis=f"h{k}", k=k, parent_id=base
            )
            gate = GateResult(accepted=ok, category="accepted" if ok else "slower", objective=g)
            record = make_record() if ok else make_record(False, "slower")
            store.add_evaluation(pid, record, objective=g, per_shape={}, gate=gate)
            ids.append(pid)
        d = decide_round(store, task, run, 1)
        assert d.winner is not None and d.winner.id == ids[1]  # 1.25, proposed before the tie
        assert d.gain == pytest.approx(0.25)
        assert set(d.gains) == set(ids[:3])  # the rejected one is no candidate for best
        assert decide_round(store, task, run, 2).winner is None


def test_two_interpreter_candidates_are_both_judged_and_recorded_in_round_one(tmp_path):
    folder = _task_copy(tmp_path)
    fewer = FUSED.read_text().replace("NUM_WARPS = 8", "NUM_WARPS = 4")
    cands = _write_candidates(tmp_path / "cands", {
        "01_fused": (FUSED.read_text(), "Fuse the three kernels into one row kernel."),
        "02_warps": (fewer, "Fused, with 4 warps per row instead of 8."),
    })  # fmt: skip
    task = load_task(folder)
    summary = run_loop(
        task,
        ScriptedAgent(cands, per_round=2),
        Options(device="cpu", rounds=1, **FAST),
        RunView(live_enabled=False),
    )
    rows = _rows(task, "SELECT p.round, p.k, p.status, e.category FROM proposals p "
                       "LEFT JOIN evaluations e ON e.proposal_id = p.id ORDER BY p.id")  # fmt: skip
    assert [(r["round"], r["k"], r["status"], r["category"]) for r in rows] == [
        (0, 1, "evaluated", "accepted"),
        (1, 1, "evaluated", "accepted"),
        (1, 2, "evaluated", "accepted"),
    ]
    # Correct but not measured (the interpreter): neither is promoted.
    assert summary["best_objective_vs_baseline"] == 1.0 and "not measured" in summary["reason"]
    assert len(_rows(task, "SELECT * FROM best_changes")) == 1
    listed = json.loads(CliRunner().invoke(app, ["history", str(folder), "--json"]).output)
    assert [(a["round"], a["k"]) for a in listed] == [(0, 1), (1, 1), (1, 2)]


def test_the_same_source_twice_in_a_round_is_refused_the_second_time(tmp_path):
    def run(task, script):
        opts = Options(device="cpu", shapes=ONE, rounds=1)
        return run_loop(task, ScriptedAgent(script, per_round=2), opts, RunView(live_enabled=False))

    scripted = [FAST_, ("03_fast_copy.py", "fast.py", "Again.")]
    task, _ = measured_round(tmp_path, scripted, run)
    rows = _rows(task, "SELECT id, round, k, status, refused_reason FROM proposals WHERE round = 1")
    assert [(r["k"], r["status"]) for r in rows] == [(1, "evaluated"), (2, "refused")]
    # named by its history id, as everywhere the agent reads (issue 47)
    assert f"the same source as candidate #{rows[0]['id']} of" in rows[1]["refused_reason"]
