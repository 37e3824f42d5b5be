"""The gate's decisions on REAL CPU timings of the CPU-native task (plain PyTorch,
language = "torch").

One sandboxed worker per implementation times fast.py, an identical copy of it (the
"best"), the baseline, slow.py and tail_trap.py interleaved on every shape; each decision
below is the gate applied to those measurements with a different candidate/best pairing.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.bench import BenchmarkRecord, benchmark, noise
from kernelloop.evaluate.trusted.clock.interleave_types import OUTER_PHASES
from kernelloop.evaluate.trusted.clock.timing_checks import BUSY
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.gate import decide, performance_gate
from kernelloop.task import load_task
from tests.busy import TRIES, measured, wait_for_quiet

ROOT = Path(__file__).resolve().parents[2]
CPU_TASK = ROOT / "examples" / "cpu_task"
CANDS = CPU_TASK / "candidates"
CHEATS = Path(__file__).parent / "cheats"


@pytest.fixture(scope="module")
def task():
    return load_task(CPU_TASK)


def bench_when_idle(*args, **kwargs) -> BenchmarkRecord:
    """benchmark(), measured again (waiting for quiet, bounded: tests/busy.py) while its only
    problems are the machine being too busy — an infrastructure verdict the tool gives,
    correctly, on a loaded 2-core CI runner (the CI rehearsal of 2026-12-01 met it here);
    these tests are about the verdicts on an idle machine, so a machine that stays busy
    skips them rather than judging or passing them."""
    return measured(lambda: benchmark(*args, **kwargs), lambda r: r.problems, "benchmark")


@pytest.fixture(scope="module")
def timed(task, tmp_path_factory) -> BenchmarkRecord:
    copy = tmp_path_factory.mktemp("best") / "fast_copy.py"
    shutil.copyfile(CANDS / "fast.py", copy)

    def once() -> BenchmarkRecord:
        return bench_when_idle(
            task,
            CANDS / "fast.py",
            best=copy,
            device="cpu",
            # Enough paired rounds that the noise bar (3 x noise) does not swallow a 4x gain
            # on a noisy 2-core runner (CI 2026-12-04: noise 212% at 0.5 s per shape, 3 rounds).
            max_s_per_shape=1.2,
            against={"slow": CANDS / "slow.py", "tail_trap": CANDS / "tail_trap.py"},
        )

    # Measured again (bounded) while fast-vs-baseline is too noisy for the gate to tell a 4x
    # gain from chance: the verdicts below are about an idle machine's timings. The last
    # record is used whatever its noise, so the tests still judge it.
    rec = once()
    for _ in range(TRIES - 1):
        if pair_noise(rec, task) <= DECIDABLE_NOISE:
            break
        wait_for_quiet()
        rec = once()
    return rec


DECIDABLE_NOISE = 0.9  # beyond it the gate's 3 x noise bar nears the ~4x gain tested here


def pair_noise(rec: BenchmarkRecord, task) -> float:
    """The gate's combined noise for fast.py (the candidate) against the baseline."""
    return performance_gate(as_pair(rec, "candidate", "baseline"), task.spec.rules).noise_rel or 0.0


def as_pair(rec: BenchmarkRecord, cand: str, best: str) -> BenchmarkRecord:
    """The same measurements, read as `cand` (the candidate) against `best` (the best)."""
    out = rec.model_copy(deep=True)
    out.best = "best"
    for sb in out.shapes:
        impls = dict(sb.impls)
        sb.impls = {"candidate": impls[cand], "best": impls[best], "baseline": impls["baseline"]}
        if "best#aa" in impls:
            sb.impls["best#aa"] = impls["best#aa"]
        sb.noise_rel, sb.aa_rel_diff = noise(sb, "best", "best")
    return out


def test_record_is_complete_and_counts(timed):
    assert timed.problems == []
    assert timed.timings_count and not timed.interpreter
    assert timed.sandbox in {"bwrap", "unshare"}
    assert timed.impl_sha256["candidate"] == timed.impl_sha256["best"]
    for sb in timed.shapes:
        assert set(sb.impls) == {"candidate", "best", "baseline", "slow", "tail_trap", "best#aa"}
        assert all(it.n >= 15 for it in sb.impls.values())
        assert sb.aa_rel_diff is not None and sb.observed_s >= sb.reported_s
        # What the trusted clock saw of the candidate (issue 34): its own reported median.
        assert sb.clock is not None
        assert sb.clock.reported_ms == pytest.approx(
            sb.impls["candidate"].median_ms - sb.clock.raised_ms, abs=2e-6
        )
    # Where the wall time went, by part: the outer parts (rounds hold audit and through)
    # fit inside the run's wall time, and the audits are a part of the rounds.
    ph = timed.phases_s
    assert {"start", "load", "prepare", "rough", "rounds", "stop", "audit"} <= set(ph)
    outer = sum(ph.get(k, 0.0) for k in OUTER_PHASES)
    assert 0 < outer <= timed.wall_s
    assert 0 < ph["audit_fetch"] < ph["audit"] < ph["rounds"] and ph["audits"] >= 2
    assert ph["audits_via_slot"] == ph["audits"]  # a shared memfd slot, never a file
    assert ph["turns"] >= 2 and 0 < ph["turn_s"] < timed.wall_s
    json.loads(timed.model_dump_json())


def test_identical_copy_is_not_an_improvement(task, timed):
    res = performance_gate(timed, task.spec.rules)
    assert not res.accepted, (res.objective, res.required_gain)
    assert res.category == "slower"


def test_fast_beats_the_baseline(task, timed):
    res = performance_gate(as_pair(timed, "candidate", "baseline"), task.spec.rules)
    assert res.accepted, res.reasons
    assert res.objective > 2.0


def test_slower_candidate_is_refused(task, timed):
    res = performance_gate(as_pair(timed, "slow", "candidate"), task.spec.rules)
    assert not res.accepted
    assert any("slower than the best" in r for r in res.reasons)


def test_tail_trap_wins_common_shapes_but_is_refused_on_the_long_tail(task, timed):
    res = performance_gate(as_pair(timed, "tail_trap", "baseline"), task.spec.rules)
    by = {s.shape: s for s in res.shapes}
    assert by["256x1024"].speedup_vs_best > 1.5
    assert not res.accepted
    assert any("2048x16 (long tail)" in r for r in res.reasons)


def test_full_verdict_with_a_real_correctness_record(task):
    rec = evaluate(task, CANDS / "fast.py", device="cpu", shapes="256x1024,2048x16", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons

    # 1 s per shape: at 0.3 s the noise estimate at 256x1024 ranged 0.5-1.3 on the 2-core
    # box (2026-12-01, before and after that session's changes alike) and the gate rightly
    # refused a 2.5x speedup under it; at 1 s it was 0.14-0.33.
    def once() -> BenchmarkRecord:
        return bench_when_idle(
            task, CANDS / "fast.py", device="cpu", shapes="256x1024,2048x16", max_s_per_shape=1.0
        )

    # Measured again (bounded) while the pair is too noisy to tell a ~4x gain from chance, as
    # `timed` is (CI 2026-12-07: noise 151%, a 4.7x gain refused under the 3 x noise bar).
    bench = once()
    for _ in range(TRIES - 1):
        if (performance_gate(bench, task.spec.rules).noise_rel or 0.0) <= DECIDABLE_NOISE:
            break
        wait_for_quiet()
        bench = once()
    verdict = decide(rec, bench, task.spec.rules)
    assert verdict.accepted, verdict.reasons


def test_inflated_clock_is_caught_by_the_trusted_clock(task):
    # Behind the screen (which refuses the patch, below), the trusted clock still catches it.
    rec = benchmark(
        task,
        CHEATS / "inflate_clock.py",
        device="cpu",
        shapes="256x1024",
        max_s_per_shape=0.3,
        screen=False,
    )
    # Whichever defence fires first stops the rounds: the trusted clock ("not real") or the
    # in-process tamper tripwire (CI saw either). A timer swapped where the tripwire cannot
    # see it is caught by the trusted clock alone in tests/redteam/test_timing.py (c).
    assert any("not real" in p or "replaced harness functions" in p for p in rec.problems), (
        rec.problems
    )
    gate = performance_gate(rec, task.spec.rules)
    assert not gate.accepted and gate.category in ("timing", "tamper"), gate


def test_a_candidate_keyed_on_repeated_inputs_never_sees_them_or_is_caught(task):
    """It turns cheap and wrong on the third call with the same input tensors. Every timed
    call now gets inputs of its own: it runs honestly, or an audit catches the wrong path."""
    rec = bench_when_idle(
        task,
        CHEATS / "cheaper_when_timed.py",
        device="cpu",
        shapes="256x1024",
        max_s_per_shape=0.3,
        aa=False,
    )
    assert all(
        "the timed output differs from the reference (candidate:" in p for p in rec.problems
    ), rec.problems
    assert not any("baseline" in p for p in rec.problems)  # honest implementations are not flagged


def test_the_static_screen_refuses_before_any_worker_runs(task):
    rec = benchmark(
        task, CHEATS / "inflate_clock.py", device="cpu", shapes="256x1024", max_s_per_shape=0.3
    )
    assert rec.problems and all(p.startswith("static screen:") for p in rec.problems), rec.problems
    assert rec.sandbox == "not run" and rec.shapes == [] and rec.static_findings == rec.problems
    gate = performance_gate(rec, task.spec.rules)
    # Refused before anything ran: labelled by its stage, never as a timing failure.
    assert not gate.accepted and gate.category == "static"


def test_forged_channel_lines_are_a_problem(flagship):
    """A candidate writing to every descriptor (the channel is one) cannot forge timings:
    lines without the run's secret key are refused."""
    from tests.cheats.runner import CANDIDATES

    rec = benchmark(
        flagship,
        CANDIDATES / "forge_channel.py",
        device="cpu",
        shapes="7x129",
        dtype="float32",
        reps=2,
        aa=False,
        screen=False,
    )
    assert any("forged" in p or "key" in p for p in rec.problems), rec.problems
    assert not performance_gate(rec, flagship.spec.rules).accepted


def test_interpreter_timings_never_count(flagship):
    rec = benchmark(
        flagship,
        flagship.folder / "candidates" / "fused_naive.py",
        device="cpu",
        shapes="7x129",
        dtype="float32",
        reps=2,
        aa=False,
    )
    assert rec.problems == []
    assert rec.interpreter and not rec.timings_count
    assert "interpreter" in rec.method
    assert "never accept a speedup" in performance_gate(rec, flagship.spec.rules).reasons[0]


def test_cli_prints_the_per_shape_table(tmp_path):
    out = tmp_path / "rec.json"
    p = measured(
        lambda: _bench_cli(out),
        lambda p: (
            [
                ln
                for ln in p.stdout.splitlines()
                if "REJECTED by the performance gate (timing)" in ln
            ]
            and [BUSY] * ("the machine was too busy to time on" in p.stdout)
        ),
        "kernelloop bench",
    )
    assert "512x512" in p.stdout and "slow" in p.stdout, p.stdout + p.stderr
    _cli_checks(p, out, tmp_path)


def _bench_cli(out):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelloop.cli",
            "bench",
            str(CPU_TASK),
            str(CANDS / "fast.py"),
            "--device",
            "cpu",
            "--shapes",
            "512x512",
            "--against",
            str(CANDS / "slow.py"),
            "--record",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _cli_checks(p, out, tmp_path) -> None:
    if p.returncode != 0:
        # On a busy 2-core runner the fast candidate can miss its pass: the trusted clock's
        # excess is added to its samples (CI, 2026-12-01: 1.2 ms per call of a 0.7 ms call)
        # or the noise raises the bar (CI, 2026-12-03: 66% noise asked 2.99x of a candidate
        # measured at 3.16x). Either way the verdict must show why: the objective printed
        # below what was required.
        assert p.returncode == 1, p.stdout + p.stderr
        assert "REJECTED by the performance gate (slower)" in p.stdout, p.stdout
        got = re.search(r"objective: weighted geomean ([\d.]+)x .*; required ([\d.]+)x", p.stdout)
        assert got and float(got[1]) < float(got[2]), p.stdout
    else:
        assert "FASTER BY THE GATE'S MARGIN (not judged for correctness here" in p.stdout, p.stdout
    rec = BenchmarkRecord.model_validate_json(out.read_text())
    assert set(rec.shapes[0].impls) >= {"candidate", "baseline", "slow"}
    assert rec.shapes[0].clock.line("512x512") in p.stdout, p.stdout  # one line per shape
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelloop.cli",
            "bench",
            str(CPU_TASK),
            str(CANDS / "fast.py"),
            "--against",
            str(tmp_path / "missing.py"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "does not exist" in bad.stderr


def test_the_second_timer_runs_after_every_shapes_events(task, monkeypatch):
    # Kineto leaves CUPTI attached once a process has profiled, so the profile turns come
    # after the last timed batch of the last shape, one per shape and profiled slot, each
    # on its own shape's inputs (on a CPU the worker answers "no profiler time").
    from kernelloop.evaluate.trusted.clock.interleave import Settings, run_timing
    from kernelloop.evaluate.trusted.launch import workers

    sent: list[tuple[str, str, dict]] = []
    send = workers.TimingWorker.send

    def record(self, cmd, **args):
        sent.append((self.slot, cmd, args))
        return send(self, cmd, **args)

    monkeypatch.setattr(workers.TimingWorker, "send", record)
    shapes = task.spec.cpu_shapes[:2]

    def once():
        sent.clear()
        return run_timing(
            task,
            {"candidate": CANDS / "fast.py", "baseline": task.baseline_path},
            shapes,
            task.spec.dtypes[0],
            "cpu",
            settings=Settings(
                reps=6, min_reps=3, cpu_reps=6, cpu_min_reps=3, profile=["candidate"]
            ),
        )

    out = measured(once, lambda o: [p.text for p in o.problems], "run_timing")
    assert not out.problems, out.problems
    cmds = [c for _, c, _ in sent]
    profiles = [(slot, args) for slot, c, args in sent if c == "profile"]
    assert [slot for slot, _ in profiles] == ["candidate", "candidate"]
    assert [a["dims"] for _, a in profiles] == [s.dims for s in shapes]
    last_batch = max(i for i, c in enumerate(cmds) if c == "batch")
    assert min(i for i, c in enumerate(cmds) if c == "profile") > last_batch
    assert all(out.shapes[s.label]["candidate"].profiler_ms is None for s in shapes)
