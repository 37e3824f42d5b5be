"""A parent of the agent's choice (issue 35): a proposal naming a correct earlier
candidate is counted against it (edit points, the history's parent), and one naming
anything else is refused before evaluation. Real SQLite; no sandbox."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

from kernelloop.agents.base import Proposal
from kernelloop.history import HistoryStore
from kernelloop.loop.round import _prechecks
from kernelloop.loop.state import Best
from kernelloop.task import load_task

sys.path.insert(0, str(Path(__file__).parents[1] / "history"))
from records import make_record  # noqa: E402

FLAGSHIP = Path(__file__).parents[2] / "examples" / "ln_softmax_dropout"


def test_a_named_correct_parent_is_counted_against_and_a_wrong_one_refused(tmp_path):
    task = load_task(FLAGSHIP)
    base = task.baseline_path.read_text()
    fused = (FLAGSHIP / "candidates" / "fused_naive.py").read_text()
    store = HistoryStore.open(tmp_path / "h.sqlite")
    run_id = store.start_run(task.name, "d")
    b = store.add_proposal(run_id, 0, source=base, hypothesis="baseline")
    store.add_evaluation(b, make_record(), objective=1.0, per_shape={})
    store.set_best(run_id, b)
    f = store.add_proposal(run_id, 1, source=fused, hypothesis="fuse", parent_id=b)
    store.add_evaluation(f, make_record(), objective=None, per_shape={})  # not timed
    wrong = store.add_proposal(run_id, 1, source=fused + "\n#x\n", hypothesis="w", k=2)
    store.add_evaluation(wrong, make_record(False, "wrong", ("off",)), objective=None, per_shape={})
    assert set(store.correct_sources(task.name)) == {b, f}
    run = SimpleNamespace(task=task, store=store, id=run_id, measured=False)
    best = Best(b, base, None, 1.0)
    tweak = fused.replace("NUM_WARPS = 8", "NUM_WARPS = 4")
    # Against its chosen parent (the fused kernel) the tweak is one edit point; without
    # one it is counted against the best (the three-kernel baseline): a rewrite.
    pid, refused = _prechecks(run, 2, 1, Proposal(tweak, "fewer warps", parent=str(f)), best)
    row = store.attempt(pid)
    assert refused == [] and row.parent_id == f and row.edit_points == 1, (refused, row)
    assert row.diff_summary == "+1/-1 lines; NUM_WARPS 8→4", row.diff_summary
    pid2, _ = _prechecks(run, 2, 2, Proposal(tweak + "\n", "fewer warps again"), best)
    row2 = store.attempt(pid2)
    assert row2.parent_id == b and "lines in" in row2.diff_summary, row2.diff_summary
    _, bad = _prechecks(run, 2, 3, Proposal(tweak, "from a wrong one", parent=str(wrong)), best)
    assert any(f"parent #{wrong} is not an earlier candidate" in r for r in bad), bad
    store.close()


def test_an_earlier_runs_baseline_is_not_offered_beside_the_identical_best(tmp_path):
    """Issue 47: the Parent list offered the previous run's baseline beside the current
    best, the same source under two ids; it offers each source once (the best's id)."""
    from kernelloop.agents.base import AgentContext
    from kernelloop.agents.llm.prompts import parent_choice
    from kernelloop.loop.context import parent_choices

    task = load_task(FLAGSHIP)
    base = task.baseline_path.read_text()
    fused = (FLAGSHIP / "candidates" / "fused_naive.py").read_text()
    store = HistoryStore.open(tmp_path / "h.sqlite")
    old_run = store.start_run(task.name, "d")
    old = store.add_proposal(old_run, 0, source=base, hypothesis="baseline")
    store.add_evaluation(old, make_record(), objective=1.0, per_shape={})
    f = store.add_proposal(old_run, 1, source=fused, hypothesis="fuse", parent_id=old)
    store.add_evaluation(f, make_record(), objective=None, per_shape={})
    run_id = store.start_run(task.name, "d")
    b = store.add_proposal(run_id, 0, source=base, hypothesis="baseline")
    store.add_evaluation(b, make_record(), objective=1.0, per_shape={})
    run = SimpleNamespace(task=task, store=store, id=run_id, measured=False)
    parents = parent_choices(task, run, Best(b, base, None, 1.0))
    assert set(parents) == {str(f), str(b)}, parents
    ctx = AgentContext("t", "", "triton", "forward", base, str(b), "", "", "", 2, 3)
    text = parent_choice(ctx.__class__(**{**ctx.__dict__, "parents": parents}))
    assert f"#{f}" in text and f"#{old}," not in text and f"#{old} " not in text, text
    store.close()
