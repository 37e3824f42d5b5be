"""The gate's strength in CI (issue 33): `gate_check` on the flagship, add_rmsnorm and three
imported KernelBench problems (their hand-written Triton solutions mutated), on the CPU
through the real sandboxed evaluation: kill rate >= 98% and no false rejection.

The CI sample (docs/gate-check.md): float32 (the tightest tolerances), a seeded sample of
mutants spread over the operators (SAMPLE per task) and one equivalent rewrite per task.
A survivor fails the test with its diff: it is a gate gap, never a number to tune.
KNOWN_GAPS are mutants the gate on main does not kill yet, left out by name while the fix
is in progress (each with its issue item); they stay visible in the report's `excluded`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.evaluate.gatecheck.run import GateCheckReport, gate_check
from kernelloop.task import load_task
from kernelloop.task.kernelbench import import_problem
from tests.conftest import ROOT

KB = ROOT / "tests" / "task" / "fixtures" / "kernelbench"
SOLUTIONS = ROOT / "benchmarks" / "candidates" / "kernelbench"
MIN_KILL, MAX_FALSE_REJECT = 0.98, 0.0

# task -> (folder or KernelBench problem, kernel to mutate (None: the baseline), mutants)
CASES = {
    "ln_softmax_dropout": (ROOT / "examples" / "ln_softmax_dropout", None, 8),
    "add_rmsnorm": (ROOT / "examples" / "add_rmsnorm", None, 6),
    "kb_softmax": ("level1/23_Softmax.py", "level1_23_softmax.py", 5),
    "kb_cross_entropy": ("level1/95_CrossEntropyLoss.py", "level1_95_cross_entropy.py", 5),
    "kb_gemm_leakyrelu": (
        "level2/12_Gemm_Multiply_LeakyReLU.py",
        "level2_12_gemm_mul_leakyrelu.py",
        5,
    ),
}
WIDE_SOFTMAX = """
[[cpu_shapes]]
dims = { batch_size = 3, dim = 20011 }
weight = 1.0
tag = "wide"
"""
ASYMMETRIC_GEMM = """
[[cpu_shapes]]
dims = { batch_size = 37, in_features = 80, out_features = 48 }
weight = 1.0
tag = "asymmetric"
"""
# The cross-entropy solution's mean runs blocks of 1024 losses: on the imported CPU shapes
# (64 and 128 rows) a mutant of its block loop (`start + offs` -> `offs`) is the same
# kernel, accepted by the gate and the oracle alike — now a survivor, no longer excluded
# (issue 45). One tall CPU shape reaches its second block.
TALL_CROSS_ENTROPY = """
[[cpu_shapes]]
dims = { batch_size = 2051, num_classes = 10 }
weight = 1.0
tag = "tall"
"""
# Measured on main 2026-12-03 (129fd0c, stoch's and shapes' work merged), CPU, float32:
# the flagship's 9-mutant sample killed 8; the survivor, a kernel wrong only when p is
# above 0.5 (the largest rate the task declares), was shown wrong by the oracle's p = 0.9
# calls. The gate judges dropout only at the declared rates ([stochastic] rates and the
# task's p): a gap (issue 33, the op's whole domain), reported to the lead; the test
# below keeps it in view (it asserts the oracle shows it wrong).
KNOWN_GAPS: dict[str, list[str]] = {}  # the rate shortcut: closed by seed_values.stochastic_rates


def explain(report: GateCheckReport) -> str:
    lines = [
        f"{report.task}: kill rate {report.kill_rate} ({report.killed} killed, "
        f"{report.survived} survived), false rejections {report.false_rejections}"
    ]
    for m in report.mutants:
        if m.outcome == "survived":
            what = "a finding about the task" if m.task_finding else "gate gap"
            lines += [f"SURVIVOR ({what}) {m.operator}: {m.description}; {m.oracle}", m.diff]
    for e in report.equivalents:
        if not e.accepted:
            lines += [f"FALSE REJECTION {e.description}: {e.category} {e.reasons}", e.diff]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def kb_tasks(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("gatecheck_kb")
    # as tests/task/test_kernelbench_solutions.py: KernelBench's atol of 1e-2 accepts any
    # output of a wide softmax, so the import tightens it
    tol = {"level1/23_Softmax.py": {"atol": 1e-7}}
    folders = {
        name: import_problem(KB / problem, out, ["float32"], **tol.get(problem, {}))
        for name, (problem, _k, _n) in CASES.items()
        if isinstance(problem, str)
    }
    # The softmax solution's chunked path runs only on rows wider than 8192: on the
    # imported CPU shapes (<= 192 wide) its mutants are dead code, "not shown to differ"
    # (measured: 4 of 5). One wide CPU shape, as test_kernelbench_solutions.py adds.
    # The imported GEMM's CPU shapes are 64x64x64 and 128x128x256: batch == in_features and
    # rows a multiple of every block, so an M/K swap or a row tail cut is the same kernel
    # there (measured: 3 of 5 mutants not shown to differ). One asymmetric CPU shape.
    for name, extra in (
        ("kb_softmax", WIDE_SOFTMAX),
        ("kb_gemm_leakyrelu", ASYMMETRIC_GEMM),
        ("kb_cross_entropy", TALL_CROSS_ENTROPY),
    ):
        toml = folders[name] / "task.toml"
        toml.write_text(toml.read_text().replace("\n[roofline]", extra + "\n[roofline]"))
    return folders


@pytest.mark.parametrize("name", list(CASES))
def test_gate_kills_mutants_and_accepts_equivalents_on_the_cpu(name, kb_tasks):
    folder, kernel, n = CASES[name]
    task = load_task(kb_tasks.get(name, folder))
    report = gate_check(
        task,
        SOLUTIONS / kernel if kernel else None,
        device="cpu",
        dtypes=["float32"],
        max_mutants=n,
        max_equivalents=1,
        exclude=KNOWN_GAPS.get(name),
        seed=0,
    )
    print(explain(report), f"{report.wall_s:.0f} s")
    assert len(report.mutants) == n and len(report.equivalents) == 1
    # most of the sample must count: a kill rate over mutants the oracle cannot tell from
    # the original would measure nothing
    assert report.killed + report.survived >= (n + 1) // 2, explain(report)
    assert report.meets(MIN_KILL, MAX_FALSE_REJECT), explain(report)


# The GPU sample's seed per task: level1/23's seed-0 sample spends an evaluation at the
# problem's size (4096x393216, ~60 s on an H200) on a mutant in the n_cols <= 8192 path,
# dead at that width; seed 1's lands in the chunked path (session 25, docs/gate-check.md).
GPU_SEED = {"kb_softmax": 1}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_gpu_gate_kills_mutants_and_accepts_equivalents(name, kb_tasks):
    """The H200's sample (what benchmarks/gate_check.sh measures, one task per device call
    at most): the CI sample's n mutants and one equivalent at every dtype on cuda. Twice
    the mutants and two equivalents per task (this test until 2026-12-05) took over 10
    minutes for level1/23 alone, more than a device call may run."""
    folder, kernel, n = CASES[name]
    task = load_task(kb_tasks.get(name, folder))
    report = gate_check(
        task,
        SOLUTIONS / kernel if kernel else None,
        device="cuda",
        max_mutants=n,
        max_equivalents=1,
        seed=GPU_SEED.get(name, 0),
    )
    print(explain(report), f"{report.wall_s:.0f} s")
    assert report.meets(MIN_KILL, MAX_FALSE_REJECT), explain(report)


def test_a_kernel_wrong_only_above_the_declared_rates_is_killed():
    """The gap gate-check found (2026-12-03): a flagship kernel wrong only when p is above
    every rate the task declares survived the gate, and the oracle's p = 0.9 showed it
    wrong (kill rate 0 on this one-mutant sample, thresholds failed). The plan now draws an
    undeclared rate above the declared ones (seed_values.stochastic_rates): the gate kills
    it.
    Were it to survive again, the oracle must show it wrong and the thresholds fail — never
    "not shown to differ". One shape (7x129) and float32 keep it to a few evaluations."""
    task = load_task(CASES["ln_softmax_dropout"][0])
    report = gate_check(
        task,
        device="cpu",
        dtypes=["float32"],
        shapes="7x129",
        operators=["shortcut"],
        exclude=["rows", "dimension", "== 0", "first element"],
        max_equivalents=0,
    )
    print(explain(report))
    [m] = report.mutants
    assert m.description == "output wrong when p > 0.5 (above every rate the task declares)"
    if m.outcome == "survived":  # the gap reopened: it must at least count against the rate
        assert m.oracle.startswith("rejected ("), m.oracle
        assert report.kill_rate == 0.0 and not report.meets(MIN_KILL, MAX_FALSE_REJECT)
    assert m.outcome == "killed", explain(report)
    assert report.kill_rate == 1.0  # (no equivalents judged here: meets() needs both halves)
