"""The "compiled" slot on REAL CPU timings: the CPU-native task's reference under
torch.compile (inductor's C++ backend on this machine), timed in its own sandboxed worker
beside the candidate and the baseline, as evidence for the record — never the gate's.

The first benchmark pays a cold inductor compile (20-30 s on the 2-core runner); later
ones in the same process reuse the compiled slot's cache folder (compile_cache.py).
The failure paths (no C++ compiler, a compile past its budget) get a cache folder of
their own so nothing compiled earlier can stand in for the compile that must fail.
"""

import hashlib
import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kernelloop.cli import app
from kernelloop.commands.bench_cmds import print_bench
from kernelloop.evaluate.trusted import bench as bench_mod
from kernelloop.evaluate.trusted.bench import BenchmarkRecord, benchmark
from kernelloop.evaluate.trusted.launch import compile_cache
from kernelloop.gate import performance_gate
from kernelloop.task import load_task
from tests import busy
from tests.bench.test_bench_cpu import CANDS, CPU_TASK

SHAPES = "256x1024,2048x16"


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> tuple[BenchmarkRecord, str]:
    """`kernelloop bench TASK fast.py --compiled` through the CLI, its record and output."""
    out = tmp_path_factory.mktemp("compiled") / "rec.json"
    args = ["bench", str(CPU_TASK), str(CANDS / "fast.py"), "--device", "cpu", "--shapes",
            SHAPES, "--no-aa", "--compiled", "--record", str(out)]  # fmt: skip

    def once():
        out.unlink(missing_ok=True)
        result = CliRunner().invoke(app, args, terminal_width=200)
        rec = BenchmarkRecord.model_validate_json(out.read_text()) if out.exists() else None
        return rec, result

    def problems(got) -> list[str]:
        rec, result = got
        return rec.problems if rec else [result.output]

    rec, result = busy.measured(once, problems, "the compiled-slot benchmark")
    # fast.py is >2x the baseline here: the gate's exit code is 0, compiled or not.
    assert result.exit_code == 0, result.output + repr(result.exception)
    return rec, result.output


def test_the_compiled_slot_is_timed_on_every_shape(cli_run):
    rec, _ = cli_run
    assert rec.problems == [], rec.problems
    c = rec.compiled
    assert c is not None and c.dropped == "", (c, rec.warnings)
    assert c.source == "reference.py:reference" and c.mode == "default" and not c.dynamic
    assert c.shapes == SHAPES.split(",")
    assert set(c.prepare_s) == set(c.shapes) and all(s > 0 for s in c.prepare_s.values())
    ref = (CPU_TASK / "reference.py").read_bytes()
    assert rec.impl_sha256["compiled"] == hashlib.sha256(ref).hexdigest()
    for sb in rec.shapes:
        it = sb.impls["compiled"]
        assert it.median_ms > 0 and it.n >= 15 and it.method == sb.impls["candidate"].method
        assert sb.speedup_vs_compiled and sb.speedup_vs_compiled > 0
    assert rec.speedup_vs_compiled and rec.speedup_vs_compiled > 0
    assert rec.speedup_vs_baseline and rec.speedup_vs_baseline > 2.0
    json.loads(rec.model_dump_json())


def test_the_gate_never_reads_the_compiled_slot(cli_run):
    rec, _ = cli_run
    rules = _rules()
    with_it = performance_gate(rec, rules)
    without = rec.model_copy(deep=True)
    without.compiled, without.speedup_vs_compiled = None, None
    for sb in without.shapes:
        sb.impls.pop("compiled")
        sb.speedup_vs_compiled = None
    assert with_it.model_dump() == performance_gate(without, rules).model_dump()
    assert with_it.accepted, with_it.reasons
    # Even a compiled slot 1000x faster than the candidate changes nothing.
    faster = rec.model_copy(deep=True)
    for sb in faster.shapes:
        it = sb.impls["compiled"]
        it.samples_ms = [x / 1000 for x in it.samples_ms]
        it.median_ms /= 1000
    assert performance_gate(faster, rules).model_dump() == with_it.model_dump()


def test_the_table_and_summary_show_it(cli_run):
    rec, output = cli_run
    assert "× compiled" in output and "over torch.compile" in output, output
    assert "compiled slot: reference.py:reference under torch.compile" in output
    console = Console(record=True, width=220)
    print_bench(rec, performance_gate(rec, _rules()), console)
    text = console.export_text()
    assert f"{rec.speedup_vs_compiled:.3f}x over torch.compile" in text, text
    assert f"{rec.speedup_vs_baseline:.3f}x over the baseline" in text


def _rules():
    return _task().spec.rules


def _bench_compiled_2048x16() -> BenchmarkRecord:
    """fast.py on 2048x16 with the compiled slot, measured again while a busy machine
    refuses to time (tests/busy.py)."""
    return busy.measured(
        lambda: benchmark(
            _task(), CANDS / "fast.py", device="cpu", shapes="2048x16", max_s_per_shape=0.3,
            aa=False, compiled=True,
        ),
        lambda r: r.problems,
        "the compiled-slot benchmark",
    )  # fmt: skip


@pytest.fixture
def cold_cache(tmp_path, monkeypatch):
    """A compile cache root of this test's own: no earlier compile can be reused."""
    monkeypatch.setattr(compile_cache, "_root", tmp_path / "compile-cache")


def test_without_a_cxx_compiler_the_slot_is_dropped_and_the_gate_unchanged(cold_cache, monkeypatch):
    """A CPU box without a working C++ compiler: inductor cannot build its kernels, the
    compiled slot is dropped with the reason in the record, nothing else changes."""
    bind = compile_cache.bind_compiled

    def no_cxx(cfg, source):
        cfg = bind(cfg, source)
        return type(cfg)(**{**cfg.__dict__, "extra_env": {**cfg.extra_env, "CXX": "/no/c++"}})

    monkeypatch.setattr(compile_cache, "bind_compiled", no_cxx)
    rec = _bench_compiled_2048x16()
    assert rec.problems == [], rec.problems
    assert rec.compiled is not None and rec.compiled.shapes == []
    why = rec.compiled.dropped
    assert "2048x16" in why and "torch.compile failed" in why and "C++ compiler" in why, why
    assert any(w.startswith("compiled slot dropped") for w in rec.warnings), rec.warnings
    assert all("compiled" not in sb.impls for sb in rec.shapes)
    assert rec.speedup_vs_compiled is None and rec.speedup_vs_baseline > 1.0
    gate = performance_gate(rec, _rules())
    assert gate.accepted, gate.reasons


def test_a_compile_past_its_budget_is_cut_and_the_rest_times_on(cold_cache, monkeypatch):
    monkeypatch.setattr(bench_mod, "COMPILE_BUDGET_S", (2.0, 1.0))  # a cold compile: 20 s+
    rec = _bench_compiled_2048x16()
    assert rec.problems == [], rec.problems
    assert rec.compiled is not None and rec.compiled.budget_s == 2.0
    assert "within a 2 s budget" in rec.compiled.dropped, rec.compiled.dropped
    assert "did not answer 'prepare'" in rec.compiled.dropped
    assert rec.shapes and "compiled" not in rec.shapes[0].impls
    assert rec.wall_s < 60  # the compile was cut, not waited for
    assert performance_gate(rec, _rules()).accepted


def _task():
    return load_task(CPU_TASK)
