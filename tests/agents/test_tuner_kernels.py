"""The tuner on a multi-kernel baseline (issue 35): the flagship's three kernels share
NUM_WARPS (and two share BLOCK_COLS); the tuner gives each kernel its own copy and moves
one kernel's launch parameters at a time and jointly, within the task's edit-point limit,
and the tuned source still computes the op."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from test_tuner import context

from kernelloop.agents.tuner import TunerAgent, find_tunables
from kernelloop.agents.tuner_kernels import per_kernel_names, split_shared
from kernelloop.policy import check_proposal, edit_points, refusals
from kernelloop.task.load import load_task

FLAGSHIP = Path(__file__).parents[2] / "examples" / "ln_softmax_dropout"
COPIES = {
    "BLOCK_COLS": ("BLOCK_COLS_LAYERNORM", "BLOCK_COLS_SOFTMAX"),
    "NUM_WARPS": ("NUM_WARPS_LAYERNORM", "NUM_WARPS_SOFTMAX", "NUM_WARPS_DROPOUT_RESIDUAL"),
}


def test_the_split_gives_each_kernel_its_own_launch_parameters():
    task = load_task(FLAGSHIP)
    base = task.baseline_path.read_text()
    lits = find_tunables(base, task.spec.task.tunables)
    split = split_shared(
        base, {t: x.value for t, x in lits.items()}, {t: x.end for t, x in lits.items()}
    )
    assert split is not None and split.copies == COPIES
    assert split.tunables == (*COPIES["BLOCK_COLS"], *COPIES["NUM_WARPS"], "ELEMWISE_BLOCK")
    tree = ast.parse(split.source)
    launch = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Subscript)]  # fmt: skip
    assert any("BLOCK=BLOCK_COLS_LAYERNORM, num_warps=NUM_WARPS_LAYERNORM" in x for x in launch)
    assert any("BLOCK=BLOCK_COLS_SOFTMAX, num_warps=NUM_WARPS_SOFTMAX" in x for x in launch)
    # ELEMWISE_BLOCK is the dropout kernel's alone (grid and block): not copied.
    assert any("cdiv(n, ELEMWISE_BLOCK)" in x and "NUM_WARPS_DROPOUT_RESIDUAL" in x for x in launch)
    # A later round finds the copies and tunes them in place of the shared name.
    names = per_kernel_names(split.source, task.spec.task.tunables)
    assert tuple(find_tunables(split.source, names)) == split.tunables
    assert split_shared(split.source, {"NUM_WARPS_SOFTMAX": 4}, {"NUM_WARPS_SOFTMAX": 0}) is None


def test_the_tuner_moves_one_kernel_at_a_time_and_jointly_within_the_rules(tmp_path):
    task = load_task(FLAGSHIP)
    base = task.baseline_path.read_text()
    props = TunerAgent(task, per_round=40).propose(context(base, {}))
    # First the pattern library at the baseline's marked spot (its dropout RNG), then
    # each kernel's own launch parameters.
    rng = props[0]
    assert rng.direction.startswith("pattern: one Philox call for four elements of a flat block")
    per_kernel = [p for p in props if p.direction.startswith("per-kernel")]
    assert len(per_kernel) >= 10, [p.direction for p in props]
    assert props.index(per_kernel[0]) == 1
    joint = [p for p in per_kernel if "sweep" in p.direction]
    assert joint and any("NUM_WARPS_SOFTMAX" in p.direction for p in per_kernel)
    for p in props:
        found = refusals(check_proposal(task.spec.rules, base, p.source, task.spec.task.entry))
        assert found == [], (p.direction, found)
        assert len(edit_points(base, p.source)) <= task.spec.rules.max_edit_points
    # One kernel's warps move; the other two keep the shared value.
    one = next(p for p in per_kernel if p.direction.endswith("NUM_WARPS_SOFTMAX up"))
    lits = find_tunables(one.source, [*COPIES["NUM_WARPS"]])
    assert [lits[n].value for n in COPIES["NUM_WARPS"]] == [4, 8, 4]
    # ... and both sources still compute the op (Triton's interpreter, against torch); the
    # RNG rewrite drops about p of the elements, the same seed twice gives the same mask
    # and another seed an independent one (what the judge checks, docs/evaluate.md).
    (tmp_path / "cand.py").write_text(one.source)
    (tmp_path / "rng.py").write_text(rng.source)
    script = """
import torch, cand, rng
torch.manual_seed(0)
x, r, w, b = torch.randn(7, 300), torch.randn(7, 300), torch.randn(300), torch.randn(300)
ref = torch.softmax(torch.nn.functional.layer_norm(x, (300,), w, b, 1e-5), -1)
err = max((m.forward(x, r, w, b, p=0.0, eps=1e-5, seed=3) - ref - r).abs().max().item()
          for m in (cand, rng))
z = torch.zeros_like(r)
o1, o2, o3 = (rng.forward(x, z, w, b, p=0.5, eps=1e-5, seed=s) for s in (3, 3, 4))
d1, d3 = o1 == 0, o3 == 0
assert torch.equal(o1, o2)
assert torch.allclose(o1[~d1], 2 * ref[~d1], atol=1e-5)
print(err, d1.float().mean().item(), (d1 != d3).float().mean().item())
"""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-2000:]
    err, dropped, differ = (float(v) for v in done.stdout.split())
    assert err < 1e-5
    # 2100 elements: sd 0.011 for the dropped fraction and for the disagreement.
    assert abs(dropped - 0.5) < 0.066 and abs(differ - 0.5) < 0.066, (dropped, differ)
