"""The tuner searches: a deterministic sweep pruned by the rule table, the edit-point limit
and compile facts, and structural moves from the pattern library at marked spots."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests.agents.test_tuner import FUSED, context, make_task
from tests.conftest import FLAGSHIP

from kernelloop.agents.tuner import TunerAgent
from kernelloop.agents.tuner_patterns import find_spots
from kernelloop.agents.tuner_sweep import sweep
from kernelloop.agents.tuner_table import DEFAULT_TABLE, TunerRulesError, load_table
from kernelloop.policy import check_proposal, edit_points, refusals
from kernelloop.task import load_task

NAIVE = (FLAGSHIP / "candidates" / "fused_naive.py").read_text()
CURRENT = {"ROWS_PER_PROGRAM": 4, "NUM_WARPS": 8, "NUM_STAGES": 2}
TABLE = load_table(DEFAULT_TABLE)


def _values(configs, tunable):
    return {c.new for cfg in configs for c in cfg.changes if c.tunable == tunable}


def test_the_sweep_is_the_pruned_product_in_a_fixed_order():
    configs, pruned = sweep(CURRENT, TABLE, {})
    again, _ = sweep(dict(CURRENT), TABLE, {})
    assert configs == again
    # ROWS 1..16 and WARPS 2..32 (two notches of pow2), STAGES 1..4 (linear), at most two
    # tunables changed: 11 single changes and 40 pairs; the 48 triples are pruned.
    assert len(configs) == 51 and pruned == {
        "more than 2 tunables changed (the task's edit-point limit)": 48
    }
    assert [len(c.changes) for c in configs] == sorted(len(c.changes) for c in configs)
    assert [c.describe() for c in configs[:2]] == [
        "ROWS_PER_PROGRAM 4 -> 2",
        "ROWS_PER_PROGRAM 4 -> 8",
    ]
    assert _values(configs, "NUM_STAGES") == {1, 3, 4}
    assert len(sweep(CURRENT, TABLE, {}, max_changed=1)[0]) == 11


def test_the_rule_table_and_compile_facts_prune_the_sweep():
    full, _ = sweep(CURRENT, TABLE, {})
    # Register-limited occupancy asks for fewer warps: no config with more survives.
    regs, pruned = sweep(CURRENT, TABLE, {"occupancy_limiter": "registers"})
    assert _values(regs, "NUM_WARPS") == {2, 4} and pruned["against a rule the profile fires"]
    # 168 registers/thread: 16 warps need 32*16*168 = 86016 > 65536 registers.
    fit, pruned = sweep(CURRENT, TABLE, {"registers_per_thread": 168})
    assert _values(fit, "NUM_WARPS") == {2, 4} and len(fit) < len(full)
    assert pruned["the block would not fit the SM's registers at the measured count"]
    fit, _ = sweep(CURRENT, TABLE, {"registers_per_thread": 64})  # 32*32*64 fits
    assert _values(fit, "NUM_WARPS") == {2, 4, 16, 32}
    # A spilling kernel: no config gives a thread more live data.
    spill, _ = sweep(CURRENT, TABLE, {"spills": 12, "waves_per_sm": 3.0})
    assert _values(spill, "ROWS_PER_PROGRAM") == {1, 2} and 2 not in _values(spill, "NUM_WARPS")
    # 150 KB of shared memory at 2 stages: 4 stages would need 300 KB.
    smem, pruned = sweep(CURRENT, TABLE, {"shared_bytes": 150_000})
    assert _values(smem, "NUM_STAGES") == {1, 3}
    assert pruned["the block would need more shared memory than an SM has"]


def test_the_tuner_proposes_its_sweep_as_one_round_and_respects_the_edit_limit(tmp_path):
    task = make_task(tmp_path / "t")
    round_ = TunerAgent(task, per_round=8).propose(context(FUSED, {"spills": 3}))
    assert len(round_) == 8 and len({p.source for p in round_}) == 8
    assert any(p.direction.startswith("sweep:") for p in round_)
    for p in round_:
        assert 1 <= len(edit_points(FUSED, p.source)) <= len(p.direction.split(", "))
    # The same inputs give the same round.
    again = TunerAgent(task, per_round=8).propose(context(FUSED, {"spills": 3}))
    assert [p.source for p in again] == [p.source for p in round_]
    # A task that allows one edit point gets single-literal configs only.
    strict = tmp_path / "strict"
    make_task(strict)
    (strict / "task.toml").write_text(
        (strict / "task.toml").read_text() + "[rules]\nmax_edit_points = 1\n"
    )
    one = load_task(strict)
    props = TunerAgent(one, per_round=30).propose(context(FUSED))
    assert len(props) == 11  # every single change within two notches, no pairs
    for p in props:
        assert refusals(check_proposal(one.spec.rules, FUSED, p.source, "forward")) == []


def test_a_marked_spot_gets_the_pattern_first_and_it_passes_the_policy():
    flagship = load_task(FLAGSHIP)
    [spot] = find_spots(NAIVE)
    assert (spot.name, spot.params) == ("dropout-rng", {"block": "BLOCK"})
    first, *rest = TunerAgent(flagship, per_round=3).propose(context(NAIVE))
    assert first.direction == "pattern: one Philox call for several elements (spot dropout-rng)"
    assert "tl.randint4x(seed, row * (BLOCK // 4) + _q)" in first.source
    assert "tl.rand(" not in first.source.split("def forward")[0]
    assert len(edit_points(NAIVE, first.source)) == 1
    rules = flagship.spec.rules
    for p in (first, *rest):
        assert refusals(check_proposal(rules, NAIVE, p.source, "forward")) == []
    # Rewritten, the spot no longer matches: from the new best the pattern is not offered.
    nxt = TunerAgent(flagship, per_round=5).propose(context(first.source))
    assert not any(p.direction.startswith("pattern:") for p in nxt)
    # Without the marker the statement is left alone.
    bare = NAIVE.replace("    # kernelloop: spot dropout-rng block=BLOCK\n", "")
    props = TunerAgent(flagship, per_round=5).propose(context(bare))
    assert not any(p.direction.startswith("pattern:") for p in props)


def test_the_rewritten_dropout_is_still_a_dropout(tmp_path):
    """Under Triton's interpreter: p=0 keeps everything (exactly LN->softmax + residual);
    p=0.5 keeps about half, each kept value scaled by 1/(1-p); two seeds, two masks."""
    flagship = load_task(FLAGSHIP)
    (p,) = TunerAgent(flagship, per_round=1).propose(context(NAIVE))
    (tmp_path / "cand.py").write_text(p.source)
    script = """
import torch, cand
torch.manual_seed(0)
x, r, w, b = torch.randn(6, 300), torch.randn(6, 300), torch.randn(300), torch.randn(300)
s = torch.softmax(torch.nn.functional.layer_norm(x, (300,), w, b, 1e-5), -1)
full = cand.forward(x, r, w, b, p=0.0, eps=1e-5, seed=1)
assert (full - (s + r)).abs().max() < 1e-5
outs = [cand.forward(x, r, w, b, p=0.5, eps=1e-5, seed=k) for k in (1, 2)]
for out in outs:
    kept = (out - r).abs() > 1e-9
    assert 0.4 < kept.float().mean() < 0.6, kept.float().mean()
    assert ((out - r)[kept] - (s * 2)[kept]).abs().max() < 1e-5
assert ((outs[0] - r).abs() > 1e-9).ne((outs[1] - r).abs() > 1e-9).any()
print("ok")
"""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_task_pattern_file_replaces_the_library_and_a_bad_one_names_the_field(tmp_path):
    task = make_task(tmp_path / "t", baseline=FUSED.replace(
        "NUM_WARPS = 8", "# kernelloop: spot warps-literal\nNUM_WARPS = 8"))  # fmt: skip
    (task.folder / "tuner_patterns.toml").write_text(
        '[[patterns]]\nname = "eight to twelve"\nspots = ["warps-literal"]\n'
        "find = '^NUM_WARPS = (?P<n>\\d+)$'\nreplace = 'NUM_WARPS = 12  # was {n}'\n"
        'hypothesis = "h {n}"\npredicted_effect = "e"\n'
    )
    (first, *_) = TunerAgent(task, per_round=2).propose(context(task.baseline_path.read_text()))
    assert "NUM_WARPS = 12  # was 8" in first.source and first.hypothesis == "h 8"
    (task.folder / "tuner_patterns.toml").write_text(
        '[[patterns]]\nname = "x"\nspots = ["s"]\nfind = "(("\nreplace = ""\n'
        'hypothesis = "h"\npredicted_effect = "e"\n'
    )
    with pytest.raises(TunerRulesError, match=r"tuner_patterns.toml: field 'patterns.0.find'"):
        TunerAgent(task)


def test_patterns_keep_crlf_line_endings(tmp_path):
    flagship = load_task(FLAGSHIP)
    crlf = NAIVE.replace("\n", "\r\n")
    (p, *_) = TunerAgent(flagship, per_round=1).propose(context(crlf))
    assert p.direction.startswith("pattern:")
    assert "\n" not in p.source.replace("\r\n", "")
