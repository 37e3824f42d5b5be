"""gate-check's mutation operators and equivalent rewrites, without running anything: each
operator finds its sites in the real kernels and rewrites exactly one with a readable diff;
the wrappers keep the entry's signature; the sample spreads over the operators; the
thresholds fail when nothing was measured."""

from __future__ import annotations

import ast
import shutil

import pytest

from kernelloop.evaluate.gatecheck import careless
from kernelloop.evaluate.gatecheck import equivalents as eq
from kernelloop.evaluate.gatecheck import mutants as mu
from kernelloop.evaluate.gatecheck.edits import Source
from kernelloop.evaluate.gatecheck.oracle import (
    ORACLE_RATES,
    first_dim_variant,
    oracle_shapes,
    oracle_task,
)
from kernelloop.evaluate.gatecheck.run import GateCheckReport, mutants_of
from kernelloop.task import load_task
from tests.conftest import ROOT

FLAGSHIP = ROOT / "examples" / "ln_softmax_dropout"
RMSNORM = ROOT / "examples" / "add_rmsnorm"
CROSS_ENTROPY = ROOT / "benchmarks" / "candidates" / "kernelbench" / "level1_95_cross_entropy.py"


def _flagship():
    task = load_task(FLAGSHIP)
    return task, mutants_of(task, task.baseline_path.read_text(), "cpu", None)


def test_every_operator_mutates_the_flagship_with_one_readable_edit():
    task, (variants, src, _ctx) = _flagship()
    ops = {v.operator for v in variants}
    # wrong_axis needs a 2-D reduction; the flagship's are all 1-D
    expected = set(mu.OPERATORS) - {"wrong_axis"} | {"shortcut", "output_cache"}
    assert ops == expected | set(careless.CARELESS)
    for v in variants:
        ast.parse(v.source)
        assert v.source != src.text
        assert v.diff.startswith("--- a/kernel.py")
        assert f"@@ -{v.line - 1}" in v.diff or f"@@ -{v.line}" in v.diff, v
    by_desc = {v.description: v for v in variants}
    wider = "+        acc += tl.load(x_row + offs, mask=offs <= cols, other=0.0).to(tl.float32)"
    assert any(wider in v.diff for v in variants if v.operator == "mask_off_by_one")
    rate = by_desc["dropout rate `p` -> `p * 0.5`"]
    assert "keep = tl.rand(seed, offs) >= (p) * 0.5" in rate.source
    assert "eps * 10" in by_desc["`eps` x10"].source
    # one edit per mutant: a single changed line (the wrappers and the call counter excepted)
    for v in variants:
        if v.operator not in ("shortcut", "output_cache") and "400th" not in v.description:
            removed = [ln for ln in v.diff.splitlines() if ln.startswith("-") and ln[1:2] != "-"]
            assert len(removed) == 1, v.diff


def test_wrappers_keep_the_entry_signature_and_use_no_torch_compute():
    task, (variants, src, _ctx) = _flagship()
    wrapped = [v for v in variants if v.operator in ("shortcut", "output_cache")]
    assert {v.description for v in wrapped} >= {
        "output wrong when rows > 64 and rows % 64 != 0",
        "output wrong when p == 0",
        "output wrong when p > 0 and every input's first element non-zero",
        "output wrong when p > 0.5 (above every rate the task declares)",
        "output cached by shape",
        "output cached by pointer",
    }
    for v in wrapped:
        tree = ast.parse(v.source)
        entries = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "forward"]
        assert len(entries) == 1
        assert ast.unparse(entries[0].args) == "x, residual, weight, bias, *, p, eps, seed"
        # the op audit rejects torch compute: only reads, sizes, fill_ and Triton copies
        added = "".join(ln for ln in v.diff.splitlines() if ln.startswith("+"))
        for bad in (".clone(", ".abs(", ".amax(", ".sum(", "_kl_torch.zeros"):
            assert bad not in added + v.source[-1500:]
        assert "(the gate-check helpers _kl_* appended at the end)" in v.diff


def test_a_kernelbench_solution_is_wrapped_as_a_method_and_gets_axis_mutants():
    kb = load_task(FLAGSHIP)  # only the context matters: entry wrapped in ModelNew
    src = Source(CROSS_ENTROPY.read_text())
    ctx = {
        "entry": "forward",
        "model_class": "ModelNew",
        "rate": None,
        "seed": None,
        "params": {},
        "max_first_dim": 7,
        "tunables": [],
        "max_rate": 0,
        "closed_shapes": True,
    }
    from kernelloop.evaluate.gatecheck.wrappers import caching, shortcuts

    assert kb.name
    shortcut = next(iter(shortcuts(src, ctx)))
    assert "    def forward(self, predictions, targets):\n        _kl_out = " in shortcut.source
    assert "self._kl_orig_forward(predictions, targets)" in shortcut.source
    assert len(list(caching(src, ctx))) == 2
    axes = list(mu.wrong_axis(src, ctx))
    assert axes and all("axis=" in v.description for v in axes)


def test_sample_spreads_over_operators_and_is_seeded():
    _task, (variants, _src, _ctx) = _flagship()
    a = mu.sample(variants, 8, seed=1)
    assert len({v.operator for v in a}) == 8  # round-robin: one per operator first
    assert [v.source for v in a] == [v.source for v in mu.sample(variants, 8, seed=1)]
    assert mu.sample(variants, None, seed=1).__len__() == len(variants)


def test_equivalents_move_declared_tunables_and_warps_only():
    task, (_v, src, ctx) = _flagship()
    eqs = [v for op in eq.EQUIVALENTS.values() for v in op(src, ctx)]
    descs = {v.description for v in eqs}
    assert {"BLOCK_COLS 1024 -> 512", "BLOCK_COLS 1024 -> 2048", "NUM_WARPS 4 -> 2"} <= descs
    assert "torch.empty* -> torch.zeros*" in descs
    assert any(v.operator == "reciprocal" for v in eqs)
    # a constant the task does not declare tunable is never moved
    assert not any("ELEMWISE" in d and "ROWS" in d for d in descs)
    rms = load_task(RMSNORM)
    _m, rsrc, rctx = mutants_of(rms, rms.baseline_path.read_text(), "cpu", None)
    assert {v.description for v in eq.tunables(rsrc, rctx)} >= {"NORM_BLOCK 1024 -> 512"}


def test_oracle_adds_undeclared_shapes_rates_and_repeats(tmp_path):
    folder = tmp_path / "t"
    shutil.copytree(FLAGSHIP, folder)
    task = load_task(folder)
    assert first_dim_variant({"rows": 5, "cols": 1000}) == {"rows": 67, "cols": 1000}
    assert first_dim_variant({"rows": 100, "cols": 3}) == {"rows": 203, "cols": 3}
    extra = oracle_shapes(task, "cpu", task.shapes_for("cpu"))
    labels = {s.label for s in extra}
    assert labels == {"67x129", "15x259"}  # from the smallest judged shape, 7x129
    o = oracle_task(task, "cpu", extra)
    assert o.spec.suites.random_repeats >= 3
    assert set(ORACLE_RATES) <= set(o.spec.stochastic.rates)
    assert len(o.shapes_for("cpu")) == len(task.shapes_for("cpu")) + len(extra)
    assert task.folder == o.folder and len(task.shapes_for("cpu")) == 4  # the task untouched


def _report(**kw) -> GateCheckReport:
    base = dict(
        task="t",
        kernel="k.py",
        device="cpu",
        dtypes=["float32"],
        sandbox="bwrap",
        sample_seed=0,
        mutants_generated=0,
        equivalents_generated=0,
        mutants=[],
        equivalents=[],
        killed=0,
        survived=0,
        kill_rate=None,
        false_rejections=0,
        false_reject_rate=None,
        wall_s=0.0,
    )
    return GateCheckReport(**{**base, **kw})


@pytest.mark.parametrize(
    ("kill", "fr", "ok"),
    [
        (None, 0.0, False),
        (1.0, None, False),
        (0.97, 0.0, False),
        (1.0, 0.5, False),
        (0.98, 0.0, True),
    ],
)
def test_thresholds_fail_when_nothing_was_measured(kill, fr, ok):
    assert _report(kill_rate=kill, false_reject_rate=fr).meets(0.98, 0.0) is ok


def test_a_check_with_an_unjudged_mutant_or_equivalent_does_not_stand():
    assert not _report(kill_rate=1.0, false_reject_rate=0.0, not_judged=1).meets(0.98, 0.0)


def _verdict(accepted: bool, category: str):
    from types import SimpleNamespace

    return SimpleNamespace(
        verdict=SimpleNamespace(accepted=accepted, category=category, reasons=[f"{category}: x"])
    )


@pytest.mark.parametrize(
    ("first", "second", "outcome", "calls"),
    [
        # three of level1/23's five "kills" on the H200 (2026-12-03) were the trusted side's
        # out-of-memory: judged again, and a second infrastructure verdict is not a kill
        ("internal", "internal", "not_judged", 2),
        ("setup", "wrong", "killed", 2),
        ("internal", "accepted", "survived", 2),
        ("compile", None, "stillborn", 1),  # the compiler's finding, not the gate's
        ("wrong", None, "killed", 1),
        ("accepted", None, "survived", 1),
    ],
)
def test_infrastructure_verdicts_are_judged_again_and_never_counted_as_kills(
    first, second, outcome, calls
):
    from kernelloop.evaluate.gatecheck.run import judged_twice, mutant_outcome

    answers = [_verdict(c == "accepted", c) for c in (first, second) if c]
    asked, said = [], []

    def judge(path, on, what):
        asked.append(what)
        return answers[len(asked) - 1]

    rec = judged_twice(judge, ROOT / "k.py", None, "mutant 1/5", said.append)
    assert mutant_outcome(rec) == outcome and len(asked) == calls
    assert bool(said) == (calls == 2)  # the retry is said, with the first verdict's reason


def test_the_command_exits_2_on_a_setup_error_before_judging_anything(tmp_path):
    import subprocess
    import sys

    plain = tmp_path / "plain.py"
    plain.write_text("SCALE = 2\n")  # no kernel, no entry: nothing to mutate
    cli = [sys.executable, "-m", "kernelloop.cli", "gate-check", str(RMSNORM)]
    out = subprocess.run([*cli, str(plain)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "no mutation site found in plain.py" in out.stderr
    out = subprocess.run([*cli, "--operators", "nope"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "unknown operator(s) ['nope']" in out.stderr, out.stderr


def test_a_survivor_the_oracle_accepts_too_counts_as_survived(monkeypatch):
    """Issue 45, class 7: nothing is excluded as "not shown to differ". A mutant the gate and
    the oracle both accept is a survivor marked as a finding about the task (its inputs
    cannot tell it apart), and the kill rate counts it. The evaluation is a stand-in here
    (the counting is under test): it rejects mutants whose source holds `<= cols` and
    accepts everything else, the oracle's configuration included."""
    from types import SimpleNamespace

    from kernelloop.evaluate.gatecheck import run

    def evaluate(task, path, **kw):
        wrong = "<= cols" in path.read_text()
        return SimpleNamespace(
            verdict=SimpleNamespace(
                accepted=not wrong,
                category="wrong" if wrong else "accepted",
                reasons=["random/case0 7x129 float32: wrong values"] if wrong else [],
            ),
            environment=SimpleNamespace(sandbox="none"),
            failed_checks=lambda: [],
        )

    monkeypatch.setattr(run, "evaluate", evaluate)
    task = load_task(FLAGSHIP)
    report = run.gate_check(
        task,
        device="cpu",
        shapes="7x129",
        operators=["mask_off_by_one"],
        max_mutants=2,
        max_equivalents=1,
        seed=0,
    )
    outcomes = sorted(m.outcome for m in report.mutants)
    assert outcomes == ["killed", "survived"], report.mutants
    [s] = [m for m in report.mutants if m.outcome == "survived"]
    assert s.task_finding and "strengthen the task" in s.oracle
    assert report.survived == 1 and report.task_findings == 1 and report.kill_rate == 0.5
    assert not report.meets(0.98, 0.0)
    assert "not_shown_to_differ" not in report.model_dump_json()


def test_a_mutant_that_is_a_known_equivalent_rewrite_is_proven_equivalent():
    from kernelloop.evaluate.gatecheck.edits import Variant
    from kernelloop.evaluate.gatecheck.run import proven_equivalent

    r = proven_equivalent(Variant("wrong_constant", 3, "d", "x = 1\n", "diff"))
    assert r.outcome == "equivalent" and not r.task_finding


FUSED = FLAGSHIP / "candidates" / "fused_naive.py"
# issue 45's careless-engineer classes, as mutants of the flagship's fused kernel
CARELESS_ON_FUSED = {
    "eps outside the sqrt: `(tl.sqrt(tl.sum(d * d, axis=0) / cols) + eps)`",
    "eps dropped: `tl.sum(d * d, axis=0) / cols + eps`",
    "eps hard-coded to 1e-05",
    "eps hard-coded to 1e-06",
    "weight ignored (`w_ptr`)",
    "|w| used (`w_ptr`)",
    "bias ignored (`b_ptr`)",
    "bias's last element dropped",
    "elements past 1024 ignored (`offs < cols`)",
    "elements past 16384 ignored (`offs < cols`)",
    "rows past 128 never written (`offs < cols`)",
    "`tl.program_id(0).to(tl.int64)` -> 32-bit `tl.program_id(0)`",
    "seed truncated to 16 bits",
    "keyed on seed + row",
    "mask periodic over 16 rows",
    "rate depends on `x`'s sign",
    "the seed ignored after the 400th call",
}


def test_the_careless_engineer_mutants_apply_to_the_fused_kernel_and_run():
    """Every class of issue 45's careless edits is generated for fused_naive.py, and every
    one imports and runs outside kernelloop (under the interpreter, in a subprocess): none
    is stillborn, so whatever the gate does with it is a finding about the gate."""
    import json
    import subprocess
    import sys

    task = load_task(FLAGSHIP)
    variants, _src, _ctx = mutants_of(task, FUSED.read_text(), "cpu", list(careless.CARELESS))
    assert {v.description for v in variants} == CARELESS_ON_FUSED
    code = (
        "import json, sys, types, torch\n"
        "out = []\n"
        "for k, text in enumerate(json.load(sys.stdin)):\n"
        "    m = types.ModuleType(f'm{k}'); m.__file__ = f'/tmp/m{k}.py'\n"
        "    exec(compile(text, m.__file__, 'exec'), m.__dict__)\n"
        "    g = torch.Generator().manual_seed(k)\n"
        "    x, r = torch.randn(3, 129, generator=g), torch.randn(3, 129, generator=g)\n"
        "    w, b = torch.randn(129, generator=g), torch.randn(129, generator=g)\n"
        "    y = m.forward(x, r, w, b, p=0.1, eps=1e-5, seed=3)\n"
        "    out.append(list(y.shape))\n"
        "print(json.dumps(out))\n"
    )
    # the interpreter's own source lookup needs real files: write them
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        texts = []
        for k, v in enumerate(variants):
            (Path(d) / f"m{k}.py").write_text(v.source)
            texts.append(v.source)
        run = subprocess.run(
            [sys.executable, "-c", code.replace("/tmp/", d + "/")],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            timeout=300,
            env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"},
        )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.splitlines()[-1]) == [[3, 129]] * len(variants)


def test_the_careless_mutants_apply_to_add_rmsnorm():
    task = load_task(RMSNORM)
    variants, _src, _ctx = mutants_of(
        task, task.baseline_path.read_text(), "cpu", list(careless.CARELESS)
    )
    ops = {v.operator for v in variants}
    assert ops == {"eps_misplaced", "affine_ignored", "tail_beyond", "offsets_32bit"}
    assert "eps outside the sqrt" in " ".join(v.description for v in variants)
