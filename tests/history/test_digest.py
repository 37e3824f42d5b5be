"""The digest fed back to the agent: content, order and size for a full 8-round run."""

from __future__ import annotations

import pytest
from kernels import SOFTMAX_PARENT, with_block
from records import SHAPES, make_record

from kernelloop.history import HistoryStore
from kernelloop.history.digest import tokens_by_chars, tokens_by_words

LONG_HYP = (
    "The profile shows {what}; {change} should remove it because each program then {why}. "
    "This keeps the single fused pass and does not change the reduction order."
)
OUTCOMES = [  # (accepted, category, reasons, objective factor vs parent)
    (True, "accepted", (), 1.18),
    (
        False,
        "slower",
        ("slower than best by 3.9% (noise 0.8%)", "long-tail 1024x32768 lost 14%"),
        0.96,
    ),
    (False, "wrong", ("extreme/near_overflow: max rel err 0.91 at row 3 (inf after exp)",), None),
    (True, "accepted", (), 1.07),
    (False, "compile", ("triton compile error: shared memory 263168 B exceeds 232448 B",), None),
    (False, "slower", ("gain 0.2% is below min_gain 0.5%",), 1.002),
]


def _fill(store: HistoryStore, rounds: int = 8, per_round: int = 2) -> int:
    run = store.start_run("ln_softmax_dropout", "d1", agent="llm", arch="sm_90")
    base = store.add_proposal(run, 0, source=SOFTMAX_PARENT, hypothesis="baseline")
    store.add_evaluation(base, make_record(), objective=1.0, per_shape={s: 1.0 for s in SHAPES})
    store.set_best(run, base)
    best, best_obj, n = base, 1.0, 0
    for rnd in range(1, rounds + 1):
        store.start_round(run, rnd)
        for k in range(1, per_round + 1):
            accepted, category, reasons, factor = OUTCOMES[n % len(OUTCOMES)]
            n += 1
            pid = store.add_proposal(
                run,
                rnd,
                k=k,
                parent_id=best,
                agent="llm",
                model="strong-model" if k == 1 else "cheap-model",
                source=with_block(SOFTMAX_PARENT, 1024 + 64 * n),
                hypothesis=LONG_HYP.format(
                    what=f"{40 + n}% of stalls on long scoreboard",
                    change=f"raising BLOCK_COLS to {1024 + 64 * n}",
                    why="issues fewer, wider loads",
                ),
                predicted_effect=f"+{3 + n}% on the 16384-row shapes, neutral elsewhere",
                attribution="gain came from fewer DRAM transactions; "
                "L2 hit rate fell as a side effect",
            )
            obj = best_obj * factor if factor else None
            per_shape = (
                {s: (obj or 1.0) * (1 - 0.02 * i) for i, s in enumerate(SHAPES)} if obj else {}
            )
            deltas = {
                "dram_throughput_pct": (71.0, 79.5),
                "l2_hit_pct": (86.0, 81.0),
                "regs": (64.0, 96.0),
                "achieved_occupancy_pct": (48.0, 37.5),
                "stall_long_sb_pct": (41.0, 22.0),
            }
            store.add_evaluation(
                pid,
                make_record(accepted, category, reasons),
                objective=obj,
                per_shape=per_shape,
                metric_deltas=deltas if obj else {},
            )
            if accepted:
                store.set_best(run, pid)
                best, best_obj = pid, obj
        if rnd == 6:  # a duplicate refused before it cost a benchmark
            dup = store.add_proposal(
                run,
                rnd,
                k=per_round + 1,
                parent_id=best,
                source=SOFTMAX_PARENT,
                hypothesis="Process 4 rows per program to amortize launch overhead.",
            )
            store.refuse_proposal(
                dup, "near-duplicate of rejected #3 (round 1, slower): code similarity 0.97"
            )
        store.finish_round(run, rnd)
    return run


@pytest.mark.parametrize("per_round", [2, 3])
def test_digest_of_eight_rounds_stays_under_1500_tokens_by_both_counts(tmp_path, per_round):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        _fill(store, 8, per_round)
        digest = store.digest("ln_softmax_dropout")
    assert tokens_by_chars(digest) < 1500, digest
    assert tokens_by_words(digest) < 1500, digest
    assert digest.count("\n#") >= 8  # it still says something about most attempts


def test_digest_leads_with_the_biggest_win_and_the_worst_measured_failure_and_ends_with_refusals(
    tmp_path,
):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        _fill(store, 8, 2)
        attempts = {a.id: a for a in store.attempts("ln_softmax_dropout")}
        digest = store.digest("ln_softmax_dropout")
    order = [
        attempts[int(line.split()[0][1:])] for line in digest.splitlines() if line.startswith("#")
    ]
    evaluated = [a for a in attempts.values() if a.round > 0 and a.evaluated]
    assert len(order) == len(evaluated) + 1  # every attempt and the refusal, at least in one line
    assert order[0].gain == max(a.gain for a in evaluated if a.accepted)
    assert order[1].gain == min(a.gain for a in evaluated if a.gain)
    assert order[2].objective is None and not order[2].accepted  # a breakage, the latest
    assert (
        order[-1].status == "refused" and "near-duplicate of rejected #3" in digest.splitlines()[-1]
    )
    # the top entries are in full form; the tail is one line each, with what changed
    assert "\n  change: " in digest and "[BLOCK " in digest


def test_each_attempt_shows_change_effect_attribution_next_to_deltas_and_reasons(tmp_path):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        _fill(store, 2, 2)
        digest = store.digest("ln_softmax_dropout")
        slower = next(a for a in store.attempts("ln_softmax_dropout") if a.category == "slower")
    text = slower.format_for_prompt()
    assert f"#{slower.id} r{slower.round} rejected [slower]" in text
    assert "-4.0% vs #" in text  # measured effect against its parent
    assert "change: +1/-1 lines; BLOCK 1088→1152" in text  # what changed
    assert (
        "predicted: +5% on the 16384-row shapes" in text and "measured: all 5 shapes -4.0%" in text
    )
    assert "agent's attribution: gain came from fewer DRAM" in text
    assert "metric deltas: " in text and "occupancy_pct 48→37.5" in text
    assert "long-tail 1024x32768 lost 14%" in text
    assert text in digest  # few attempts: all rendered in full


def test_no_history_says_so(tmp_path):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.start_run("ln_softmax_dropout", "d1")
        assert store.digest("ln_softmax_dropout") == "No earlier attempts on this task."
