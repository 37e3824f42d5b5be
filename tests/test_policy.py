"""Policy: each refusal happens before evaluation, from the sources alone; run-level stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.policy import (
    bound_check,
    budget_check,
    check_launch_count,
    check_proposal,
    edit_points,
    new_arch_guard,
    pending_approval_reason,
    refusals,
    rules_text,
    stall_check,
)
from kernelloop.task.spec import Rules

FIXTURES = Path(__file__).parent / "agents" / "fixtures"
FUSED = (FIXTURES / "fused_rowwise.py").read_text()
SPLIT = (FIXTURES / "split_rowwise.py").read_text()


def edit(source: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


def refused_rules(rules: Rules, parent: str, candidate: str) -> list[str]:
    return [d.rule for d in refusals(check_proposal(rules, parent, candidate, "forward"))]


# Four changes, each more than 3 code lines from the next.
FOUR_HUNKS = (
    ("ROWS_PER_PROGRAM = 4", "ROWS_PER_PROGRAM = 2"),
    ("var = tl.sum(xc * xc, axis=0) / n_cols", "var = tl.sum(xc * xc, axis=0) * (1.0 / n_cols)"),
    ("keep = tl.rand(seed, offs) >= p", "keep = tl.rand(seed, offs) > p"),
    ("out = torch.empty_like(x2)", "out = torch.empty(x2.shape, dtype=x2.dtype, device=x2.device)"),
)


def test_four_hunk_edit_is_refused_and_three_pass():
    four = edit(FUSED, *FOUR_HUNKS)
    assert len(edit_points(FUSED, four)) == 4
    decisions = refusals(check_proposal(Rules(), FUSED, four, "forward"))
    assert [d.rule for d in decisions] == ["edit_points"]
    assert "4 edit points" in decisions[0].reason and "at most 3" in decisions[0].reason
    assert "candidate line 12;" in decisions[0].reason  # where, so the agent can split it
    three = edit(FUSED, *FOUR_HUNKS[:3])
    assert refused_rules(Rules(), FUSED, three) == []
    assert refused_rules(Rules(max_edit_points=5), FUSED, four) == []


def test_nearby_hunks_merge_into_one_edit_point():
    # Three adjacent tunables changed one line apart: one idea, one edit point.
    cand = edit(
        FUSED,
        ("ROWS_PER_PROGRAM = 4", "ROWS_PER_PROGRAM = 8"),
        ("NUM_STAGES = 2", "NUM_STAGES = 3"),
    )
    points = edit_points(FUSED, cand)
    assert len(points) == 1 and points[0].candidate_lines == (12, 14)
    assert len(edit_points(FUSED, cand, merge_gap=0)) == 2


def test_comments_docstrings_blank_lines_and_spacing_are_not_edit_points():
    cosmetic = edit(
        FUSED,
        ('"""LayerNorm -> Softmax', '"""Rewritten module docstring.\n\nLayerNorm -> Softmax'),
        (
            "    pid = tl.program_id(0)\n",
            "    # one program per ROWS rows\n\n    pid = tl.program_id(0)\n",
        ),
        ("mean = tl.sum(x, axis=0) / n_cols", "mean = tl.sum( x, axis = 0 )/n_cols  # fp32"),
    )
    assert edit_points(FUSED, cosmetic) == []
    assert refused_rules(Rules(), FUSED, cosmetic) == ["no_change"]


def test_indentation_and_string_lines_count():
    reindented = edit(FUSED, ("        tl.store(out_ptr", "    tl.store(out_ptr"))
    assert len(edit_points(FUSED, reindented)) == 1
    cuda = 'SRC = """\n__global__ void k(float* x) {\n  x[0] = 1.0f;\n  x[1] = 2.0f;\n}\n"""\n'
    assert len(edit_points(cuda, cuda.replace("2.0f", "3.0f"))) == 1


def test_splitting_a_fused_kernel_is_refused_under_the_fusion_lock():
    decisions = refusals(check_proposal(Rules(), FUSED, SPLIT, "forward"))
    fusion = [d for d in decisions if d.rule == "fusion_lock"]
    assert len(fusion) == 1
    assert "1 launch site(s) in the parent and 3 in the candidate" in fusion[0].reason
    # The flagship allows it: fusing is its first step.
    allowed = check_proposal(
        Rules(allow_fusion_change=True, max_edit_points=99), FUSED, SPLIT, "forward"
    )
    assert refusals(allowed) == []


def test_launch_sites_through_helpers_count_per_call():
    # Calling a launching helper twice from the entry is two more launches per call.
    src = FUSED.replace(
        "    return out.reshape(x.shape)",
        "    _poke(out)\n    _poke(out)\n    return out.reshape(x.shape)",
    )
    src += (
        "\n\ndef _poke(t):\n"
        "    _fused_rowwise_kernel[(1,)](t, t, t, t, t, 0, 1, 1, 0.0, 0.0, 0, "
        "BLOCK_COLS=16, ROWS=1)\n"
    )
    decision = [
        d for d in check_proposal(Rules(), FUSED, src, "forward") if d.rule == "fusion_lock"
    ][0]
    assert not decision.allowed and "3 in the candidate" in decision.reason


def test_cuda_inline_launches_are_counted():
    parent = '''
from torch.utils.cpp_extension import load_inline
CUDA = """
__global__ void a(float* x) {}
__global__ void b(float* x) {}
void run(torch::Tensor x) { a<<<1, 32>>>(x.data_ptr<float>()); b<<<1, 32>>>(x.data_ptr<float>()); }
"""
_ext = None
def _mod():
    global _ext
    if _ext is None:
        _ext = load_inline(name="k", cpp_sources="", cuda_sources=CUDA, functions=["run"])
    return _ext
def forward(x):
    _mod().run(x)
    return x
'''
    fused = parent.replace(" b<<<1, 32>>>(x.data_ptr<float>());", "")
    assert refused_rules(Rules(), parent, fused) == ["fusion_lock"]
    assert refused_rules(Rules(), parent, parent.replace("a<<<1, 32>>>", "a<<<2, 64>>>")) == []


def test_measured_launch_count_rule():
    assert not check_launch_count(Rules(), 1, 3).allowed
    assert check_launch_count(Rules(), 3, 3).allowed
    assert check_launch_count(Rules(), None, 3).allowed
    assert check_launch_count(Rules(allow_fusion_change=True), 1, 3).allowed


@pytest.mark.parametrize(
    "old,new",
    [
        (
            "def forward(x, residual, weight, bias, *, p, eps, seed):",
            "def forward(x, residual, weight, bias, p, eps, seed):",
        ),
        (
            "def forward(x, residual, weight, bias, *, p, eps, seed):",
            "def forward(x, residual, weight, bias=None, *, p, eps, seed):",
        ),
        (
            "def forward(x, residual, weight, bias, *, p, eps, seed):",
            "def forward(x, residual, bias, weight, *, p, eps, seed):",
        ),
        (
            "def forward(x, residual, weight, bias, *, p, eps, seed):",
            "def forward(x, residual, weight, bias, *, p, eps, seed, **kw):",
        ),
    ],
)
def test_signature_change_is_refused_under_the_interface_lock(old, new):
    cand = edit(FUSED, (old, new))
    decisions = refusals(check_proposal(Rules(), FUSED, cand, "forward"))
    assert [d.rule for d in decisions] == ["interface_lock"]
    assert "forward(x, residual, weight, bias, *, p, eps, seed)" in decisions[0].reason
    assert refused_rules(Rules(interface_lock=False), FUSED, cand) == []


def test_annotations_and_equal_defaults_are_not_interface_changes():
    parent = "def forward(x, *, eps=1e-5):\n    return x\n"
    cand = "def forward(x: 'Tensor', *, eps: float = 0.00001) -> 'Tensor':\n    return x + 0\n"
    assert refused_rules(Rules(), parent, cand) == []


def test_missing_entry_and_unparsable_candidates_are_refused():
    renamed = edit(FUSED, ("def forward(", "def forward_v2("))
    assert "entry" in refused_rules(Rules(), FUSED, renamed)
    broken = FUSED.replace("def forward(x, residual", "def forward(x residual")
    decisions = check_proposal(Rules(), FUSED, broken, "forward")
    assert [d.rule for d in decisions] == ["parse"] and not decisions[0].allowed
    # An unparsable parent leaves the locks to the evaluation instead of crashing the loop.
    assert refused_rules(Rules(), broken, FUSED) == []


def test_stall_stops_after_three_small_rounds_with_floor_distance():
    rules = Rules()
    assert stall_check([0.10, 0.004, 0.001], rules, 72.0) is None
    assert stall_check([0.001, 0.02, 0.001, 0.0], rules, 72.0) is None
    stop = stall_check([0.10, 0.004, 0.001, 0.0], rules, pct_of_floor=72.0)
    assert stop is not None and stop.status == "needs review" and stop.rule == "stall"
    assert "72.0% of the roofline floor" in stop.reason and "1.39x" in stop.reason
    unknown = stall_check([0.0, 0.0, 0.0], rules)
    assert unknown is not None and "unknown" in unknown.reason
    assert stall_check([0.0, 0.0], Rules(stall_rounds=2)) is not None


def test_bound_and_budget_stops():
    assert bound_check(94.9, Rules()) is None
    assert bound_check(None, Rules()) is None
    stop = bound_check(95.0, Rules())
    assert stop is not None and stop.status == "bound reached"
    assert budget_check(7, 0.0, 0.0, Rules()) is None
    assert budget_check(8, 0.0, 0.0, Rules()).rule == "max_rounds"
    assert budget_check(1, 2.5, 0.0, Rules(max_cost_usd=2.0)).rule == "max_cost_usd"
    assert budget_check(1, 0.0, 3600.0, Rules(max_wall_s=600)).rule == "max_wall_s"


def test_new_architecture_guard():
    assert new_arch_guard(0, Rules()) is True
    assert new_arch_guard(1, Rules()) is False
    assert new_arch_guard(2, Rules(approvals_for_new_arch=3)) is True
    assert new_arch_guard(0, Rules(approvals_for_new_arch=0)) is False
    assert "kernelloop approve" in pending_approval_reason("sm_90", 0, Rules())


def test_rules_text_follows_the_task():
    assert "Do not change the number of kernel launches" in rules_text(Rules(), "forward")
    assert "You may fuse" in rules_text(
        Rules(allow_fusion_change=True, max_edit_points=2), "forward"
    )
    assert "At most 2 edit points" in rules_text(Rules(max_edit_points=2), "forward")


def test_an_unsandboxed_evaluation_is_held_for_approval_unless_allowed():
    from kernelloop.policy import unsandboxed_hold

    assert unsandboxed_hold(["bwrap", "bwrap"], allowed=False) == ""
    held = unsandboxed_hold(["none", "bwrap"], allowed=False)
    assert "--allow-unsandboxed" in held and "kernelloop approve" in held
    assert unsandboxed_hold(["bwrap", "none"], allowed=False)  # an unsandboxed benchmark too
    assert unsandboxed_hold(["none"], allowed=True) == ""
