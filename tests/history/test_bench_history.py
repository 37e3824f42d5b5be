"""The benchmark record and gate verdict kept with each evaluation, and what export shows of
them."""

from __future__ import annotations

import hashlib
import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from kernels import SOFTMAX_MULTIROW, SOFTMAX_ONLINE, SOFTMAX_PARENT
from records import make_record
from tests.bench.records import record as bench_record
from tests.bench.records import uniform

from kernelloop.evaluate.trusted.clock.bench_record import BenchmarkRecord, GpuState, ImplTiming
from kernelloop.evaluate.trusted.values.record import Environment
from kernelloop.gate import GateResult, performance_gate
from kernelloop.history import HistoryStore, history_path
from kernelloop.history.export_text import benchmark_markdown, export_message
from kernelloop.history.schema import MIGRATIONS, SCHEMA_VERSION
from kernelloop.task import load_task
from kernelloop.task.spec import Rules
from kernelloop.versions import Versions

RUNNER = Path(__file__).parent / "cli_runner.py"
SHA = "f" * 64  # make_record's candidate_sha256
# Candidate vs best 0.9 ms everywhere: 1.125x, 1.0x, 0.9x, 0.947x; vs baseline 1.0 ms: 1.25x …
CAND = {"256x1024": 0.8, "512x512": 0.9, "2048x16": 1.0, "8x16384": 0.95}


def _kl(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "220", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, str(RUNNER), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def gpu_bench(
    cand: dict[str, float], best: dict[str, float] | None, sha: str = SHA
) -> BenchmarkRecord:
    """A GPU benchmark record with everything export shows: floors, clocks, an extra impl."""
    rec = bench_record(
        cand,
        best,
        aa_diff=0.001,
        candidate_sha256=sha,
        device_name="NVIDIA H200",
        compute_capability="9.0",
        driver="570.86",
        torch="2.13.0",
        triton="3.6.0",
        cuda="12.8",
        method="cuda-events",
        gpu_state=[
            GpuState(
                when="before",
                sm_clock_mhz=1980,
                mem_clock_mhz=3201,
                throttle_reasons="0x0000000000000000",
                temperature_c=38,
                power_w=121.5,
            ),
            GpuState(
                when="after",
                sm_clock_mhz=1755,
                mem_clock_mhz=3201,
                throttle_reasons="0x0000000000000004",
                temperature_c=61,
                power_w=690,
            ),
        ],
    )
    for sb in rec.shapes:
        sb.floor_ms = 0.4
        for it in sb.impls.values():
            it.pct_of_floor = 100 * sb.floor_ms / it.median_ms
    first = rec.shapes[0]
    first.impls["against_v2"] = ImplTiming(
        impl="against_v2",
        median_ms=0.625,
        p20_ms=0.6,
        p80_ms=0.65,
        n=80,
        method="cuda-events",
        pct_of_floor=64.0,
    )
    return rec


def _evaluated(store: HistoryStore, run: int, source: str, **kw) -> int:
    pid = store.add_proposal(run, 1, source=source, hypothesis="h")
    store.add_evaluation(pid, make_record(), objective=1.0, per_shape={}, **kw)
    return pid


# ---- store -----------------------------------------------------------------------------


def test_bench_and_gate_are_stored_with_the_evaluation_and_read_back(tmp_path):
    bench = gpu_bench(CAND, uniform(0.9))
    gate = performance_gate(bench, Rules())
    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        run = store.start_run("softmax", "d1")
        with_models = _evaluated(store, run, "a = 1\n", bench=bench, gate=gate)
        as_text = bench.model_dump_json(indent=1)
        with_text = _evaluated(store, run, "a = 2\n", bench=as_text, gate=gate.model_dump_json())
        without = _evaluated(store, run, "a = 3\n")
        unevaluated = store.add_proposal(run, 1, source="a = 4\n", hypothesis="h")
    with HistoryStore.open(path) as store:  # on disk, not just in the connection
        assert BenchmarkRecord.model_validate_json(store.bench_json(with_models)) == bench
        assert GateResult.model_validate_json(store.gate_json(with_models)) == gate
        assert store.bench_json(with_text) == as_text  # a JSON string is stored verbatim
        assert store.gate_json(with_text) == gate.model_dump_json()
        assert (store.bench_json(without), store.gate_json(without)) == (None, None)
        assert (store.bench_json(unevaluated), store.gate_json(unevaluated)) == (None, None)
        assert store.record_json(with_models) == make_record().model_dump_json()


def test_wrong_bench_or_gate_arguments_write_nothing(tmp_path):
    bench = gpu_bench(CAND, None)
    gate = performance_gate(bench, Rules())
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        run = store.start_run("softmax", "d1")
        pid = store.add_proposal(run, 1, source="a = 1\n", hypothesis="h")
        for kw, err in (
            (dict(bench=gate, gate=bench), TypeError),
            (dict(bench=make_record()), TypeError),
            (dict(bench="not json"), ValueError),
            (dict(gate="[1, 2]"), ValueError),
        ):
            with pytest.raises(err):
                store.add_evaluation(pid, make_record(), objective=1.0, per_shape={}, **kw)
        assert store.record_json(pid) is None and store.attempt(pid).accepted is None
        store.add_evaluation(
            pid, make_record(), objective=1.0, per_shape={}, bench=bench, gate=gate
        )
        # A second evaluation of the same proposal fails as a whole: the first bench stays.
        with pytest.raises(sqlite3.IntegrityError):
            store.add_evaluation(
                pid,
                make_record(),
                objective=2.0,
                per_shape={},
                bench=gpu_bench(uniform(0.5), None),
                gate=gate,
            )
        assert store.bench_json(pid) == bench.model_dump_json()


def test_a_v1_database_migrates_and_keeps_its_rows(tmp_path):
    path = tmp_path / "h.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0] + "\nPRAGMA user_version = 1;")
    conn.execute(
        "INSERT INTO runs (id, task, task_digest, arch, started_at) "
        "VALUES (1, 'softmax', 'd1', 'sm_90', 't')"
    )
    conn.execute(
        "INSERT INTO proposals (id, run_id, round, source, source_sha256, fingerprint, hypothesis, "
        "created_at) VALUES (7, 1, 0, 'x = 1\n', 'sha', 'fp', 'baseline', 't')"
    )
    conn.execute(
        "INSERT INTO evaluations (proposal_id, accepted, category, objective, per_shape_json, "
        "record_json, created_at) VALUES (7, 1, 'accepted', 1.0, '{\"4096x8000\": 1.0}', "
        "'{\"old\": 1}', 't')"
    )
    conn.commit()
    conn.close()
    with HistoryStore.open(path) as store:
        a = store.attempt(7)
        assert (a.accepted, a.objective, a.per_shape, a.source) == (
            True,
            1.0,
            {"4096x8000": 1.0},
            "x = 1\n",
        )
        assert store.record_json(7) == '{"old": 1}'
        assert (store.bench_json(7), store.gate_json(7)) == (None, None)
        bench = gpu_bench(CAND, None)
        pid = _evaluated(store, 1, "y = 2\n", bench=bench)
        assert store.bench_json(pid) == bench.model_dump_json() and store.gate_json(pid) is None
    conn = sqlite3.connect(path)
    assert (
        conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 2
    )  # later migrations append
    cols = {r[1]: (r[2], r[3]) for r in conn.execute("PRAGMA table_info(evaluations)")}
    assert cols["bench_json"] == ("TEXT", 0) and cols["gate_json"] == ("TEXT", 0)  # nullable
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_the_shipped_first_migration_is_never_edited():
    # Databases in the field record v1 as applied; an edit would never reach them.
    assert hashlib.sha256(MIGRATIONS[0].encode()).hexdigest() == (
        "89b3bbb7d49e1cf1dfc337c70d2bf2f693d06e71ad4eed1c6c1b62734c188fca"
    )


# ---- export text -------------------------------------------------------------------------


def _row(md: str, *cells: str) -> bool:
    """Whether a table row starts with these cells."""
    return any(line.startswith("| " + " | ".join(cells) + " |") for line in md.splitlines())


def test_benchmark_markdown_shows_the_record_and_the_gate(tmp_path):
    bench = gpu_bench(CAND, uniform(0.9))
    gate = performance_gate(bench, Rules())
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        run = store.start_run("softmax", "d1")
        pid = _evaluated(store, run, SOFTMAX_ONLINE, bench=bench, gate=gate)
        attempt, bench_json, gate_json = (
            store.attempt(pid),
            store.bench_json(pid),
            store.gate_json(pid),
        )
    md = benchmark_markdown(
        "softmax",
        attempt,
        make_record().model_dump_json(),
        bench_json=bench_json,
        gate_json=gate_json,
    )
    for text in (
        "## Benchmark",
        "GPU benchmark record of c.py against best",
        "Device: NVIDIA H200 (cuda), compute capability 9.0, driver 570.86",
        "Versions: torch 2.13.0, triton 3.6.0, CUDA 12.8, Python 3.12",
        "Sandbox: bwrap",
        "Timing method: cuda-events",
        "Timings count for acceptance: yes",
        "GPU before timing: SM 1980 MHz, memory 3201 MHz, throttle reasons 0x0000000000000000, "
        "38 °C, 121.5 W",
        "GPU after timing: SM 1755 MHz, memory 3201 MHz, throttle reasons 0x0000000000000004, "
        "61 °C, 690 W",
    ):
        assert text in md, text
    # Per implementation: median, p20–p80, n, % of floor (0.4 ms floor).
    assert _row(md, "256x1024", "candidate", "0.8000", "0.7920–0.8080", "100", "50.0%")
    assert _row(md, "256x1024", "best", "0.9000", "0.8910–0.9090", "100", "44.4%")
    assert _row(md, "256x1024", "baseline", "1.0000", "0.9900–1.0100", "100", "40.0%")
    assert _row(md, "256x1024", "against_v2", "0.6250", "0.6000–0.6500", "80", "64.0%")
    assert _row(md, "256x1024", "best#aa (A/A)", "0.9009", "0.8919–0.9099", "100", "44.4%")
    rows = [line.split(" | ")[1] for line in md.splitlines() if line.startswith("| 256x1024 | ")]
    assert rows[-5:] == ["candidate", "best", "baseline", "against_v2", "best#aa (A/A)"]
    # Per shape: noise (spread-based SE 0.21% beats the 0.10% A/A) and the gate's speedups.
    assert all(round(s.noise_rel, 4) == 0.0021 for s in bench.shapes)
    assert _row(
        md,
        "256x1024",
        "bfloat16",
        "common",
        "0.5",
        "0.4000",
        "–",
        "0.21%",
        "0.10%",
        "1.125x",
        "1.250x",
    )
    assert _row(
        md,
        "2048x16",
        "bfloat16",
        "long_tail",
        "0.1",
        "0.4000",
        "–",  # bound: this fixture's record names none
        "0.21%",
        "0.10%",
        "0.900x",
        "1.000x",
    )
    assert _row(
        md,
        "8x16384",
        "bfloat16",
        "long_tail",
        "0.1",
        "0.4000",
        "–",  # bound: this fixture's record names none
        "0.21%",
        "0.10%",
        "0.947x",
        "1.053x",
    )
    objective = math.exp(
        0.5 * math.log(0.9 / 0.8) + 0.1 * math.log(0.9) + 0.1 * math.log(0.9 / 0.95)
    )
    assert f"over best: **{objective:.4f}x**; required at least 1.0050x (a gain of 0.50%" in md
    assert "Gate verdict: **rejected** (slower)." in md
    assert "- 2048x16: 10.0% slower than the best (limit 5% per shape)" in md
    assert "- warning: second timer (profiler kernel durations) unavailable" in md
    assert "different bytes" not in md
    # Both JSONs verbatim; the bench block hashes to the trailer.
    block = re.search(
        r"BenchmarkRecord JSON, exactly as stored.*?```json\n(.*?)\n```", md, re.S
    ).group(1)
    assert block == bench_json and gate_json in md
    msg = export_message(
        "softmax",
        "d1",
        attempt,
        make_record().model_dump_json(),
        bench_json=bench_json,
        gate_json=gate_json,
    )
    assert f"Kernelloop-Bench-Sha256: {hashlib.sha256(block.encode()).hexdigest()}" in msg
    assert f"  gate: rejected (slower), {objective:.4f}x over best (required 1.0050x)" in msg
    other = gpu_bench(CAND, None, sha="abc").model_dump_json()
    assert "**Warning: this benchmark record is for different bytes" in benchmark_markdown(
        "softmax", attempt, make_record().model_dump_json(), bench_json=other
    )


def test_no_gate_stored_is_said_and_nothing_is_invented(tmp_path):
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        run = store.start_run("softmax", "d1")
        pid = _evaluated(store, run, "a = 1\n", bench=gpu_bench(CAND, None))
        md = benchmark_markdown(
            "softmax",
            store.attempt(pid),
            store.record_json(pid),
            bench_json=store.bench_json(pid),
            gate_json=store.gate_json(pid),
        )
    assert "No gate verdict was stored with this benchmark record." in md
    assert _row(
        md, "256x1024", "bfloat16", "common", "0.5", "0.4000", "–", "0.21%", "0.10%", "–", "–"
    )
    assert "GateResult JSON" not in md and "Gate verdict: **" not in md


# ---- kernelloop export, end to end -------------------------------------------------------------


def _run_with_best(task_dir: Path, best_record, **bench_gate) -> int:
    task = load_task(task_dir)
    v = Versions.open(task.folder, task.name, task.spec.task.baseline)
    with HistoryStore.open(history_path(task.folder)) as store:
        run = store.start_run(task.name, task.digest(), device_name="NVIDIA H200", arch="sm_90")
        base = store.add_proposal(run, 0, source=SOFTMAX_PARENT, hypothesis="baseline")
        c = v.commit_baseline(run, SOFTMAX_PARENT)
        store.set_commit(base, c.commit, c.branch)
        store.add_evaluation(base, make_record(), objective=1.0, per_shape={})
        store.set_best(run, base)
        pid = store.add_proposal(
            run, 1, source=SOFTMAX_MULTIROW, hypothesis="four rows per program", parent_id=base
        )
        c = v.commit_variant(run, 1, 1, SOFTMAX_MULTIROW, "four rows per program", proposal_id=pid)
        store.set_commit(pid, c.commit, c.branch)
        store.add_evaluation(
            pid, best_record, objective=1.25, per_shape={"256x1024": 1.25}, **bench_gate
        )
        store.set_best(run, pid)
        v.set_best(c.commit)
        store.finish_run(run, "finished")
    return pid


def _exported(task_dir: Path) -> tuple[str, str, dict[str, str]]:
    out = _kl("export", task_dir)
    assert out.returncode == 0, out.stderr
    git = ["git", "-C", str(task_dir)]
    md = subprocess.run(
        [*git, "show", "kernelloop/softmax/export:kernel/BENCHMARK.md"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    msg = subprocess.run(
        [*git, "log", "-1", "--format=%B", "kernelloop/softmax/export"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    parsed = subprocess.run(
        [*git, "interpret-trailers", "--parse"],
        input=msg,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return md, msg, dict(line.split(": ", 1) for line in parsed.splitlines())


def test_export_of_a_gpu_best_carries_its_benchmark_and_the_trailer(task_dir):
    bench = gpu_bench(uniform(0.8), None)
    gate = performance_gate(bench, Rules())
    assert gate.accepted and gate.objective == pytest.approx(1.25)
    pid = _run_with_best(task_dir, make_record(), bench=bench, gate=gate)
    md, msg, trailers = _exported(task_dir)
    with HistoryStore.open(history_path(task_dir)) as store:
        stored = store.bench_json(pid)
    assert trailers["Kernelloop-Bench-Sha256"] == hashlib.sha256(stored.encode()).hexdigest()
    assert trailers["Kernelloop-Proposal"] == str(pid)
    assert "  benchmark: NVIDIA H200 (cuda), method cuda-events, timings count: yes" in msg
    assert "  gate: faster by the gate's margin, 1.2500x over baseline (required 1.0050x)" in msg
    assert "Device: NVIDIA H200 (cuda), compute capability 9.0, driver 570.86" in md
    assert _row(md, "512x512", "candidate", "0.8000", "0.7920–0.8080", "100", "50.0%")
    assert _row(md, "512x512", "baseline (best)", "1.0000", "0.9900–1.0100", "100", "40.0%")
    assert _row(md, "512x512", "baseline#aa (A/A)", "1.0010", "0.9910–1.0110", "100", "40.0%")
    assert _row(
        md,
        "512x512",
        "bfloat16",
        "common",
        "0.3",
        "0.4000",
        "–",
        "0.21%",
        "0.10%",
        "1.250x",
        "1.250x",
    )
    assert (
        "over baseline: **1.2500x**; required at least 1.0050x" in md
        and "Gate verdict: **faster by the gate's margin**." in md
    )
    assert stored in md and "No GPU benchmark record" not in md


def test_export_of_a_cpu_run_says_speed_was_not_measured(task_dir):
    cpu = make_record()
    cpu.environment = Environment(
        device="cpu",
        device_name="cpu",
        torch="2.13.0",
        triton="3.6.0",
        python="3.12",
        sandbox="bwrap",
        interpreter=True,
    )
    cpu.timings, cpu.timings_count = [], False
    _run_with_best(task_dir, cpu)
    md, msg, trailers = _exported(task_dir)
    assert (
        "**No GPU benchmark record exists for this kernel: its speed was not measured.** "
        "It was evaluated on the CPU under the Triton interpreter"
    ) in md
    assert "  GPU benchmark record: none exists; speed was not measured" in msg
    assert "Kernelloop-Bench-Sha256" not in trailers and "Kernelloop-Record-Sha256" in trailers
    assert "### Per shape" not in md and "BenchmarkRecord JSON" not in md


def test_export_names_the_compiled_slot_and_its_speedup():
    """A benchmark with the compiled slot: the export says what it is, that it is not the
    gate's, the candidate's overall speedup over it, and why it was dropped if it was."""
    from kernelloop.history.export_bench import _device_lines

    bench = {"compiled": {"source": "reference.py:reference", "dropped": ""},
             "speedup_vs_compiled": 1.234}  # fmt: skip
    line = next(x for x in _device_lines(bench) if "Compiled slot" in x)
    assert "reference.py:reference under torch.compile" in line and "not the gate's" in line
    assert "1.234x faster overall" in line and "dropped" not in line
    bench = {"compiled": {"source": "reference.py:reference", "dropped": "no C++ compiler"}}
    line = next(x for x in _device_lines(bench) if "Compiled slot" in x)
    assert "– faster overall; dropped: no C++ compiler" in line
    assert not any("Compiled slot" in x for x in _device_lines({}))
