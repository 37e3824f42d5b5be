"""Duplicate detection on realistic Triton softmax candidates."""

from __future__ import annotations

import pytest
from kernels import (
    HYP_MULTIROW,
    HYP_MULTIROW_REWORDED,
    HYP_ONLINE,
    SOFTMAX_MULTIROW,
    SOFTMAX_MULTIROW_RENAMED,
    SOFTMAX_ONLINE,
    SOFTMAX_PARENT,
    with_block,
)
from records import make_record

from kernelloop.history import HistoryStore, changed_lines, fingerprint, normalize_source
from kernelloop.history.duplicates import text_similarity


@pytest.fixture
def store_with_rejected_multirow(tmp_path):
    """Round 1 of a run: the multi-row idea was measured and rejected as slower."""
    store = HistoryStore.open(tmp_path / "h.sqlite")
    run = store.start_run("softmax", "d1")
    base = store.add_proposal(run, 0, source=SOFTMAX_PARENT, hypothesis="baseline")
    store.add_evaluation(base, make_record(), objective=1.0, per_shape={})
    store.set_best(run, base)
    rej = store.add_proposal(
        run, 1, source=SOFTMAX_MULTIROW, hypothesis=HYP_MULTIROW, parent_id=base
    )
    store.add_evaluation(
        rej,
        make_record(False, "slower", ("slower than best by 6.3% (noise 0.9%)",)),
        objective=0.94,
        per_shape={"16384x8192": 0.94},
    )
    yield store, base, rej
    store.close()


def test_normalization_ignores_names_comments_docstrings_and_layout():
    assert normalize_source(SOFTMAX_MULTIROW) == normalize_source(SOFTMAX_MULTIROW_RENAMED)
    assert fingerprint(SOFTMAX_MULTIROW) == fingerprint(SOFTMAX_MULTIROW_RENAMED)
    norm = normalize_source(SOFTMAX_MULTIROW_RENAMED)
    assert "CTA" not in norm and "numerically" not in norm and "softmax_rows_batched" not in norm
    # what carries meaning stays: library calls, their keywords, literals
    assert "tl.load" in norm and "num_warps=" in norm and "1024" in norm


def test_literals_change_the_fingerprint():
    assert fingerprint(with_block(SOFTMAX_PARENT, 2048)) != fingerprint(SOFTMAX_PARENT)


def test_unparsable_source_still_normalizes_comments_away():
    broken = "def f(:\n    x = 1  # note\n"
    assert "note" not in normalize_source(broken)
    assert fingerprint(broken) == fingerprint("def f(:\n    x   =   1\n")


def test_renamed_reworded_variant_of_a_rejected_idea_is_refused_citing_it(
    store_with_rejected_multirow,
):
    store, base, rej = store_with_rejected_multirow
    # The reworded hypothesis shares few words: the code is what gives it away.
    assert text_similarity(HYP_MULTIROW, HYP_MULTIROW_REWORDED) < 0.5
    found = store.check_duplicate("softmax", SOFTMAX_MULTIROW_RENAMED, HYP_MULTIROW_REWORDED, base)
    assert found is not None and found.duplicate_of == rej
    assert f"#{rej}" in found.message and "slower than best by 6.3%" in found.message


def test_near_duplicate_with_another_setting_is_refused_as_near(store_with_rejected_multirow):
    store, base, rej = store_with_rejected_multirow
    variant = SOFTMAX_MULTIROW_RENAMED.replace("ROWS_PER_PROGRAM = 4", "ROWS_PER_PROGRAM = 8")
    found = store.check_duplicate("softmax", variant, "Give every CTA 8 rows.", base)
    assert found is not None and found.kind == "near" and found.duplicate_of == rej
    assert found.code_similarity >= 0.85
    assert "near-duplicate of rejected" in found.message


def test_a_genuinely_different_algorithm_passes(store_with_rejected_multirow):
    store, base, _ = store_with_rejected_multirow
    assert store.check_duplicate("softmax", SOFTMAX_ONLINE, HYP_ONLINE, base) is None


def test_a_different_tunable_setting_passes_but_the_same_one_does_not(store_with_rejected_multirow):
    store, base, _ = store_with_rejected_multirow
    run = store.runs("softmax")[0].id
    tried = store.add_proposal(
        run,
        2,
        source=with_block(SOFTMAX_PARENT, 2048),
        hypothesis="Set BLOCK to 2048.",
        parent_id=base,
    )
    store.add_evaluation(
        tried, make_record(False, "slower", ("slower",)), objective=0.97, per_shape={}
    )
    assert (
        store.check_duplicate(
            "softmax", with_block(SOFTMAX_PARENT, 4096), "Set BLOCK to 4096.", base
        )
        is None
    )
    same = store.check_duplicate(
        "softmax", with_block(SOFTMAX_PARENT, 2048), "Try BLOCK=2048", base
    )
    assert same is not None and same.kind == "identical" and same.duplicate_of == tried


def test_a_candidate_equal_to_its_parent_is_refused(store_with_rejected_multirow):
    store, base, _ = store_with_rejected_multirow
    recommented = SOFTMAX_PARENT.replace(
        "row = tl.program_id(0)", "row = tl.program_id(0)  # the row"
    )
    found = store.check_duplicate("softmax", recommented, "tidy up", base)
    assert found is not None and found.kind == "unchanged"


def test_a_fixed_retry_after_a_correctness_failure_is_allowed(tmp_path):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        run = store.start_run("softmax", "d1")
        base = store.add_proposal(run, 0, source=SOFTMAX_PARENT, hypothesis="baseline")
        store.add_evaluation(base, make_record(), objective=1.0, per_shape={})
        buggy = SOFTMAX_ONLINE.replace("z * tl.exp(m - m_new)", "z")
        bad = store.add_proposal(run, 1, source=buggy, hypothesis=HYP_ONLINE, parent_id=base)
        store.add_evaluation(
            bad,
            make_record(False, "wrong", ("max rel err 0.9 on spike",)),
            objective=None,
            per_shape={},
        )
        # The idea was never measured; the agent may retry it with the bug fixed.
        assert store.check_duplicate("softmax", SOFTMAX_ONLINE, HYP_ONLINE, base) is None
        # ...but not resubmit the identical broken kernel.
        found = store.check_duplicate("softmax", buggy, HYP_ONLINE, base)
        assert found is not None and found.kind == "identical"


def test_changed_lines_are_blind_to_names_but_not_to_structure():
    a = changed_lines(SOFTMAX_PARENT, SOFTMAX_MULTIROW)
    assert a == changed_lines(SOFTMAX_PARENT, SOFTMAX_MULTIROW_RENAMED)
    assert any(line.startswith("+for _ in range(_)") for line in a)


def test_a_kernel_only_judged_correct_on_the_cpu_is_refused_there_and_timed_on_a_gpu(
    store_with_rejected_multirow,
):
    """Issue 35: re-sending a kernel judged correct where timings do not count is refused
    in those words (never "already measured"), and a run whose timings count times it."""
    store, base, _ = store_with_rejected_multirow
    run = store.runs("softmax")[0].id
    cpu = store.add_proposal(run, 2, source=SOFTMAX_ONLINE, hypothesis=HYP_ONLINE, parent_id=base)
    store.add_evaluation(cpu, make_record(), objective=None, per_shape={})  # correct, untimed
    found = store.check_duplicate("softmax", SOFTMAX_ONLINE, HYP_ONLINE, base)
    assert found is not None and found.kind == "identical" and found.duplicate_of == cpu
    assert "already judged correct, not timed" in found.message, found.message
    assert "measured" not in found.message.split("; it was")[1].split(":")[0]
    # Where timings count the same kernel is evaluated (and so timed), not refused.
    assert store.check_duplicate("softmax", SOFTMAX_ONLINE, HYP_ONLINE, base, measured=True) is None
    # A kernel that was timed stays a duplicate everywhere, in the outcome words.
    timed = store.check_duplicate(
        "softmax", SOFTMAX_MULTIROW_RENAMED, HYP_MULTIROW, base, measured=True
    )
    assert timed is not None and "it was already measured: rejected [slower]" in timed.message
