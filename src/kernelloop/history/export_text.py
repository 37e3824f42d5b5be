"""The texts an export carries: BENCHMARK.md beside the kernel and the commit message.

Both are built from the stored records (correctness, and where there is one the
benchmark record and the gate's verdict: see export_bench), so what a reviewer reads is
what the gate saw. The commit message ends in `Kernelloop-*` trailers that CI can read
with `git interpret-trailers --parse`.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict

from pydantic import ValidationError

from kernelloop.evaluate.trusted.values.record import EvaluationRecord
from kernelloop.history.export_bench import (
    bench_sha256,
    benchmark_section,
    json_details,
    message_lines,
)
from kernelloop.history.models import Attempt
from kernelloop.task import words


def _record(record_json: str) -> EvaluationRecord | None:
    try:
        return EvaluationRecord.model_validate_json(record_json)
    except ValidationError:
        return None  # a record from an older schema: export the numbers we stored anyway


def _timing_rows(rec: EvaluationRecord) -> tuple[list[str], list[list[str]]]:
    impls = list(dict.fromkeys(t.impl for t in rec.timings))
    cells: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for t in rec.timings:
        cells[(t.shape, t.dtype)][t.impl] = (
            f"{t.median_ms:.4f} [{t.p20_ms:.4f}–{t.p80_ms:.4f}] n={t.n}"
        )
    header = ["shape", "dtype", *(f"{i} median ms [p20–p80]" for i in impls)]
    rows = [[s, d, *(c.get(i, "–") for i in impls)] for (s, d), c in cells.items()]
    return header, rows


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _env_line(rec: EvaluationRecord) -> str:
    e = rec.environment
    parts = [
        e.device_name,
        f"cc {e.compute_capability}" if e.compute_capability else "",
        f"driver {e.driver}" if e.driver else "",
        f"torch {e.torch}",
        f"triton {e.triton}" if e.triton else "",
        f"sandbox {e.sandbox}",
    ]
    return ", ".join(p for p in parts if p)


def _category(rec: EvaluationRecord) -> str:
    """A rejection's category in parentheses ("judged correct" needs none)."""
    return "" if rec.verdict.accepted else f" ({rec.verdict.category})"


def benchmark_markdown(
    task_name: str,
    attempt: Attempt,
    record_json: str,
    *,
    bench_json: str | None = None,
    gate_json: str | None = None,
) -> str:
    rec = _record(record_json)
    lines = [f"# Benchmark record: {task_name}", ""]
    lines.append(
        f"Kernel from kernelloop proposal #{attempt.id} (run {attempt.run_id}, round "
        f"{attempt.round})."
    )
    if not attempt.measured:
        lines.append("Its speed was not timed: no timing that counts is stored.")
    else:
        lines.append(
            f"Weighted geometric-mean speedup over the baseline: **{attempt.objective:.3f}x**."
        )
    lines += [
        "",
        "## Claim and measurement",
        "",
        f"- Hypothesis: {attempt.hypothesis or '–'}",
        f"- Predicted effect: {attempt.predicted_effect or '–'}",
        f"- Agent's attribution: {attempt.attribution or '–'}",
        "",
    ]
    if attempt.per_shape and attempt.measured:
        lines += [
            _md_table(
                ["shape", "speedup over baseline"],
                [[s, f"{v:.3f}x"] for s, v in attempt.per_shape.items()],
            ),
            "",
        ]
    if attempt.metric_deltas:
        lines += [
            "Profile metric deltas against the parent:",
            "",
            _md_table(
                ["metric", "parent", "this kernel"],
                [[k, f"{b:g}", f"{a:g}"] for k, (b, a) in attempt.metric_deltas.items()],
            ),
            "",
        ]
    lines += benchmark_section(
        bench_json,
        gate_json,
        correctness_device=rec.environment.device if rec else None,
        interpreter=rec.environment.interpreter if rec else False,
        correctness_sha256=rec.candidate_sha256 if rec else None,
    )
    if rec is not None:
        lines += ["## Environment of the correctness evaluation", "", _env_line(rec), ""]
        if not rec.timings_count:
            lines += [
                "**Timings below are interpreter/CPU timings and do not count as a speedup.**",
                "",
            ]
        if rec.timings:
            lines += ["## Timings", "", _md_table(*_timing_rows(rec)), ""]
        suites = rec.suites_passed()
        lines += [
            "## Correctness",
            "",
            ", ".join(f"{s}: {'pass' if ok else 'FAIL'}" for s, ok in suites.items())
            or "no checks recorded",
            f"({len(rec.checks)} checks, {len(rec.failed_checks())} failed)",
            "",
        ]
        lines += [
            "## Correctness verdict",
            "",
            f"{words.judged(rec.verdict.accepted)}{_category(rec)}. "
            + " ".join(rec.verdict.reasons),
            "",
        ]
    lines += [
        "## Full record",
        "",
        "<details><summary>EvaluationRecord JSON</summary>",
        "",
        "```json",
        json.dumps(json.loads(record_json), indent=1),
        "```",
        "",
        "</details>",
        "",
        *json_details(bench_json, gate_json),
    ]
    return "\n".join(lines)


def export_message(
    task_name: str,
    task_digest: str,
    attempt: Attempt,
    record_json: str,
    *,
    bench_json: str | None = None,
    gate_json: str | None = None,
) -> str:
    rec = _record(record_json)
    obj = f"{attempt.objective:.3f}x over baseline" if attempt.measured else "not timed"
    lines = [f"kernelloop: {task_name} best kernel, {obj}", ""]
    if attempt.hypothesis:
        lines += [" ".join(attempt.hypothesis.split())[:400], ""]
    lines.append("Benchmark record (full JSON in BENCHMARK.md):")
    if rec is not None:
        lines.append(f"  device: {_env_line(rec)}")
        lines.append(
            "  timings count for promotion: "
            f"{'yes' if rec.timings_count else 'no (interpreter/CPU)'}"
        )
    for shape, v in attempt.per_shape.items() if attempt.measured else ():
        lines.append(f"  {shape}: {v:.3f}x")
    if rec is not None:
        suites = rec.suites_passed()
        lines.append(
            "  correctness: "
            + (", ".join(f"{s} {'pass' if ok else 'FAIL'}" for s, ok in suites.items()) or "none")
        )
        lines.append(f"  verdict: {words.judged(rec.verdict.accepted)}{_category(rec)}")
    lines += message_lines(
        bench_json, gate_json, correctness_device=rec.environment.device if rec else None
    )
    trailers = {
        "Kernelloop-Task": task_name,
        "Kernelloop-Task-Digest": task_digest,
        "Kernelloop-Proposal": str(attempt.id),
        "Kernelloop-Objective": f"{attempt.objective:.4f}"
        if attempt.objective is not None
        else "none",
        "Kernelloop-Record-Sha256": hashlib.sha256(record_json.encode()).hexdigest(),
    }
    if bench_json is not None:
        trailers["Kernelloop-Bench-Sha256"] = bench_sha256(bench_json)
    if rec is not None:
        trailers["Kernelloop-Candidate-Sha256"] = rec.candidate_sha256
        trailers["Kernelloop-Device"] = rec.environment.device_name
    lines += ["", *(f"{k}: {v}" for k, v in trailers.items())]
    return "\n".join(lines) + "\n"
