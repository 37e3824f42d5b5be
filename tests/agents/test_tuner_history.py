"""The tuner reads the history before proposing (issue 47, item 8): deterministic, a second
run of the README's main job (`kernelloop run examples/ln_softmax_dropout --rounds 1`,
twice, on the CPU) re-proposed the first run's ideas and lost its rounds to duplicate
refusals; and it claimed "occupancy is limited by registers (32 per thread)" where its
own profile said 100%. The real flagship task, the real tuner, a real SQLite history and
the loop's own duplicate check (`HistoryStore.check_duplicate`), through the hook
`kernelloop run` gives the tuner (`commands/run_cmds.known_to_history`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import FLAGSHIP
from tests.history.records import make_record

from kernelloop.agents.base import AgentContext
from kernelloop.agents.tuner import TunerAgent
from kernelloop.commands.run_cmds import known_to_history
from kernelloop.history import HistoryStore
from kernelloop.history.workspace import DB_NAME
from kernelloop.task import load_task


def _context(source: str, best_id: int, metrics: dict | None = None) -> AgentContext:
    return AgentContext(
        task_name="ln_softmax_dropout", task_description="", language="triton",
        entry="forward", best_source=source, best_id=str(best_id), profile_summary="",
        history_digest="", rules_text="", round_index=1, rounds_left=1,
        profile_metrics=metrics or {},
    )  # fmt: skip


def _run_one_round(store: HistoryStore, task, base: int, proposals) -> None:
    """What `kernelloop run --rounds 1` leaves on the CPU: each candidate judged correct,
    never timed (the interpreter's timings do not count)."""
    run = store.start_run(task.name, task.digest(), agent="tuner", arch="cpu")
    store.start_round(run, 1)
    for k, p in enumerate(proposals, start=1):
        pid = store.add_proposal(
            run, 1, k=k, source=p.source, hypothesis=p.hypothesis, parent_id=base, agent="tuner"
        )
        store.add_evaluation(pid, make_record(), objective=None, per_shape={})
    store.finish_round(run, 1)
    store.finish_run(run, "finished")


def test_a_second_run_spends_no_round_on_a_duplicate(tmp_path):
    folder = tmp_path / "task"
    shutil.copytree(FLAGSHIP, folder, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    task = load_task(folder)
    baseline = task.baseline_path.read_text()
    db: Path = task.workspace(None) / DB_NAME
    db.parent.mkdir(parents=True, exist_ok=True)
    with HistoryStore.open(db) as store:
        run0 = store.start_run(task.name, task.digest(), agent="baseline", arch="cpu")
        base = store.add_proposal(run0, 0, source=baseline, hypothesis="baseline", agent="b")
        store.add_evaluation(base, make_record(), objective=1.0, per_shape={})
        store.set_best(run0, base)
        store.finish_run(run0, "finished")
    ctx = _context(baseline, base)

    first = TunerAgent(task, per_round=2)
    first.avoid(*known_to_history(task, None, "cpu"))
    round1 = first.propose(ctx)
    assert len(round1) == 2 and first.skipped == []  # nothing judged yet
    with HistoryStore.open(db) as store:
        _run_one_round(store, task, base, round1)

    # The tuner as it was (deterministic, nothing read): the same two ideas, both refused.
    blind_tuner = TunerAgent(task, per_round=2)
    blind_tuner.seed = first.seed
    blind = blind_tuner.propose(ctx)
    assert [p.source for p in blind] == [p.source for p in round1]
    with HistoryStore.open(db) as store:
        assert all(store.check_duplicate(task.name, p.source, p.hypothesis, base) for p in blind)

    # Reading the history: two new ideas, neither a duplicate, and it says what it skipped.
    second = TunerAgent(task, per_round=2)
    known, seed = known_to_history(task, None, "cpu")
    assert seed == 3  # the baseline's run and the first tuner run came before
    second.avoid(known, seed)
    round2 = second.propose(ctx)
    assert len(round2) == 2, second.skipped
    with HistoryStore.open(db) as store:
        for p in round2:
            assert store.check_duplicate(task.name, p.source, p.hypothesis, base) is None, p
    assert not {p.source for p in round2} & {p.source for p in round1}
    assert second.skipped and all("identical" in why for why in second.skipped), second.skipped


def test_runs_vary_their_first_probes():
    task = load_task(FLAGSHIP)
    ctx = _context(task.baseline_path.read_text(), 1)
    seen = []
    for seed in (1, 2, 3):
        tuner = TunerAgent(task, per_round=40)
        tuner.seed = seed
        probes = [p.direction for p in tuner.propose(ctx) if "neighbourhood" in p.direction]
        seen.append(probes[0] if probes else None)
    assert len(set(seen)) > 1, seen  # a run's number moves where the probes start


def test_no_register_limit_is_claimed_where_the_profile_says_100_percent():
    task = load_task(FLAGSHIP)
    src = task.baseline_path.read_text()
    full = {"occupancy_limiter": "registers", "registers_per_thread": 32.0,
            "theoretical_occupancy_pct": 100.0}  # fmt: skip
    said = [p.hypothesis for p in TunerAgent(task, per_round=40).propose(_context(src, 1, full))]
    assert said and not any("limited by registers" in h for h in said), said
    half = {**full, "registers_per_thread": 128.0, "theoretical_occupancy_pct": 50.0}
    said = [p.hypothesis for p in TunerAgent(task, per_round=40).propose(_context(src, 1, half))]
    limited = [h for h in said if "limited by registers" in h]
    assert limited and all("128 per thread: theoretical occupancy 50%" in h for h in limited)
