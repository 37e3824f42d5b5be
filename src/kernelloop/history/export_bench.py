"""The benchmark part of an export: what BENCHMARK.md and the commit message say about speed.

Read from the stored BenchmarkRecord and GateResult JSON as plain dicts, not through the
pydantic models: those modules import torch, which `kernelloop export` does not need,
and a record written by an older kernelloop still renders whatever fields it has.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kernelloop.task import words

NONE = "–"


def load(text: str | None) -> dict[str, Any] | None:
    """The stored JSON as a dict; None when absent or unreadable."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def bench_sha256(bench_json: str) -> str:
    """What the `Kernelloop-Bench-Sha256` trailer carries: the stored text, byte for byte."""
    return hashlib.sha256(bench_json.encode()).hexdigest()


def _f(value: Any, fmt: str, suffix: str = "") -> str:
    return NONE if value is None else f"{value:{fmt}}{suffix}"


def _pct(value: Any) -> str:
    return NONE if value is None else f"{value * 100:.2f}%"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _no_bench_text(correctness_device: str | None, interpreter: bool) -> str:
    if correctness_device == "cuda":
        return (
            "**No GPU benchmark record exists in the history for this evaluation**, so the timings "
            "behind any speedup above cannot be shown or checked here."
        )
    text = "**No GPU benchmark record exists for this kernel: its speed was not measured.**"
    if correctness_device == "cpu":
        under = " under the Triton interpreter" if interpreter else ""
        text += (
            f" It was evaluated on the CPU{under}, which checks correctness only; nothing in "
            "this file is a GPU timing."
        )
    return text


def _device_lines(b: dict[str, Any]) -> list[str]:
    dev = f"- Device: {b.get('device_name') or NONE} ({b.get('device') or NONE})"
    if b.get("compute_capability"):
        dev += f", compute capability {b['compute_capability']}"
    if b.get("driver"):
        dev += f", driver {b['driver']}"
    versions = [f"{k} {b[k]}" for k in ("torch", "triton") if b.get(k)]
    versions += [f"CUDA {b['cuda']}"] if b.get("cuda") else []
    versions += [f"Python {b['python']}"] if b.get("python") else []
    if b.get("timings_count"):
        counts = "yes"
    else:
        why = "Triton interpreter" if b.get("interpreter") else f"device {b.get('device')}"
        counts = f"**no** ({why}): these timings never accept a speedup"
    lines = [
        dev,
        f"- Versions: {', '.join(versions) or NONE}",
        f"- Sandbox: {b.get('sandbox') or NONE}",
        f"- Timing method: {b.get('method') or NONE}",
        f"- Timings count for acceptance: {counts}",
    ]
    states = [g for g in b.get("gpu_state") or [] if isinstance(g, dict)]
    for g in states:
        lines.append(
            f"- GPU {g.get('when', '?')} timing: SM {_f(g.get('sm_clock_mhz'), 'g', ' MHz')}, "
            f"memory {_f(g.get('mem_clock_mhz'), 'g', ' MHz')}, throttle reasons "
            f"{g.get('throttle_reasons') or NONE}, {_f(g.get('temperature_c'), 'g', ' °C')}, "
            f"{_f(g.get('power_w'), 'g', ' W')}"
        )
    if not states and b.get("device") == "cuda":
        lines.append("- GPU clocks and throttle state: not recorded (nvidia-smi was not available)")
    if b.get("aa_impl"):
        lines.append(
            f"- A/A slot: {b['aa_impl']} timed a second time as {b['aa_impl']}#aa, to measure the "
            "noise"
        )
    c = b.get("compiled")
    if isinstance(c, dict):
        speed = _f(b.get("speedup_vs_compiled"), ".3f", "x")
        lines.append(
            f"- Compiled slot (evidence, not the gate's): {c.get('source') or NONE} under "
            f"torch.compile, timed beside the others as `compiled`; the candidate "
            f"{speed} faster overall" + (f"; dropped: {c['dropped']}" if c.get("dropped") else "")
        )
    lines += [f"- Benchmark problem (the gate rejects): {p}" for p in b.get("problems") or []]
    lines += [f"- Benchmark warning: {w}" for w in b.get("warnings") or []]
    return lines


def _impl_order(names: list[str], best: str) -> list[str]:
    """candidate, the best, the baseline, any others, then the A/A slots."""
    aa = sorted(n for n in names if n.endswith("#aa"))
    main = [n for n in ("candidate", best, "baseline") if n in names]
    return list(dict.fromkeys(main + sorted(set(names) - set(main) - set(aa)) + aa))


def _impl_label(name: str, best: str) -> str:
    if name.endswith("#aa"):
        return f"{name} (A/A)"
    return f"{name} (best)" if name == best and name != "best" else name


def _shape_tables(b: dict[str, Any], gate: dict[str, Any] | None) -> list[str]:
    best = str(b.get("best") or "baseline")
    by_shape = {g.get("shape"): g for g in (gate or {}).get("shapes") or [] if isinstance(g, dict)}
    summary, timings = [], []
    for s in b.get("shapes") or []:
        label, g = str(s.get("shape", "?")), by_shape.get(s.get("shape"), {})
        summary.append(
            [
                label,
                str(s.get("dtype", NONE)),
                str(s.get("tag", NONE)),
                _f(s.get("weight"), "g"),
                _f(s.get("floor_ms"), ".4f"),
                str(s.get("floor_bound") or NONE),
                _pct(s.get("noise_rel")),
                _pct(s.get("aa_rel_diff")),
                _f(g.get("speedup_vs_best"), ".3f", "x"),
                _f(g.get("speedup_vs_baseline"), ".3f", "x"),
                _f(g.get("profiler_speedup_vs_best"), ".3f", "x"),
                ", ".join(g.get("flags") or []) or NONE,
            ]
        )
        impls = s.get("impls") or {}
        for name in _impl_order(list(impls), best):
            it = impls[name]
            timings.append(
                [
                    label,
                    _impl_label(name, best),
                    _f(it.get("median_ms"), ".4f"),
                    f"{_f(it.get('p20_ms'), '.4f')}–{_f(it.get('p80_ms'), '.4f')}",
                    _f(it.get("n"), ""),
                    _f(it.get("pct_of_floor"), ".1f", "%"),
                    _f(it.get("profiler_ms"), ".4f"),
                ]
            )
    if not summary:
        return ["The benchmark record has no shapes.", ""]
    return [
        "### Per shape",
        "",
        "Noise: the relative noise of a median-to-median comparison on the shape; A/A: the spread "
        "between two slots timing the same kernel. Speedups are from the gate.",
        "",
        _md_table(
            [
                "shape",
                "dtype",
                "tag",
                "weight",
                "floor ms",
                "bound",
                "noise",
                "A/A diff",
                "speedup vs best" + (f" ({best})" if best != "best" else ""),
                "speedup vs baseline",
                "profiler speedup vs best",
                "flags",
            ],
            summary,
        ),
        "",
        "### Timings per implementation",
        "",
        "% of floor: the roofline floor — max(minimal bytes / DRAM rate, minimal flops / "
        "peak rate), the bound column above says which — over the median, × 100.",
        "",
        _md_table(
            [
                "shape",
                "implementation",
                "median ms",
                "p20–p80 ms",
                "n",
                "% of floor",
                "profiler ms",
            ],
            timings,
        ),
        "",
    ]


def _gate_lines(gate: dict[str, Any] | None, best: str) -> list[str]:
    if gate is None:
        return [
            "### Gate verdict",
            "",
            "No gate verdict was stored with this benchmark record.",
            "",
        ]
    lines = ["### Gate verdict", ""]
    obj, req = gate.get("objective"), gate.get("required_gain")
    if obj is not None:
        need = (
            f"; required at least {1 + req:.4f}x (a gain of {req * 100:.2f}%, the larger of the "
            f"task's min_gain and noise_k × the combined noise {_pct(gate.get('noise_rel'))})"
            if req is not None
            else ""
        )
        lines += [
            f"Objective, the weighted geometric mean of the per-shape speedups over {best}: "
            f"**{obj:.4f}x**{need}.",
            "",
        ]
    word = words.gate_word(bool(gate.get("accepted")))
    cat = "" if gate.get("accepted") else f" ({gate.get('category', NONE)})"
    lines += [f"Gate verdict: **{word}**{cat}."]
    lines += [f"- {r}" for r in gate.get("reasons") or []]
    lines += [f"- warning: {w}" for w in gate.get("warnings") or []]
    return [*lines, ""]


def benchmark_section(
    bench_json: str | None,
    gate_json: str | None,
    *,
    correctness_device: str | None,
    interpreter: bool = False,
    correctness_sha256: str | None = None,
) -> list[str]:
    """The `## Benchmark` section of BENCHMARK.md, as lines."""
    lines = ["## Benchmark", ""]
    if bench_json is None:
        return [*lines, _no_bench_text(correctness_device, interpreter), ""]
    b = load(bench_json)
    if b is None:
        return [
            *lines,
            "A benchmark record is stored but is not a readable JSON object; it is reproduced "
            "as stored under Full record.",
            "",
        ]
    gate = load(gate_json)
    kind = (
        "GPU benchmark record" if b.get("device") == "cuda" else "Benchmark record (not a GPU run)"
    )
    phase = f" ({b['timing_phase_s']:.1f} s timing)" if b.get("timing_phase_s") is not None else ""
    lines += [
        f"{kind} of {b.get('candidate', NONE)} against {b.get('best', NONE)}, started "
        f"{b.get('started_at', NONE)}, {_f(b.get('wall_s'), '.1f', ' s')} in all{phase}.",
        "",
    ]
    if (
        correctness_sha256
        and b.get("candidate_sha256")
        and b["candidate_sha256"] != correctness_sha256
    ):
        lines += [
            "**Warning: this benchmark record is for different bytes (sha256 "
            f"{b['candidate_sha256'][:16]}…) than the correctness record "
            f"({correctness_sha256[:16]}…).**",
            "",
        ]
    lines += [*_device_lines(b), ""]
    lines += _shape_tables(b, gate)
    return lines + _gate_lines(gate, str(b.get("best") or "baseline"))


def json_details(bench_json: str | None, gate_json: str | None) -> list[str]:
    """The stored JSON, verbatim, in collapsed blocks (so its sha256 can be checked)."""
    out: list[str] = []
    for text, summary in (
        (
            bench_json,
            "BenchmarkRecord JSON, exactly as stored (its sha256 is the Kernelloop-Bench-Sha256 "
            "trailer)",
        ),
        (gate_json, "GateResult JSON, exactly as stored"),
    ):
        if text is not None:
            out += [
                f"<details><summary>{summary}</summary>",
                "",
                "```json",
                text,
                "```",
                "",
                "</details>",
                "",
            ]
    return out


def message_lines(
    bench_json: str | None, gate_json: str | None, *, correctness_device: str | None
) -> list[str]:
    """The commit message's lines about the benchmark (indented like the rest of its record)."""
    if bench_json is None:
        if correctness_device == "cuda":
            return ["  GPU benchmark record: none stored with this evaluation"]
        return ["  GPU benchmark record: none exists; speed was not measured"]
    b, gate = load(bench_json) or {}, load(gate_json)
    counts = "yes" if b.get("timings_count") else "no"
    lines = [
        f"  benchmark: {b.get('device_name', NONE)} ({b.get('device', NONE)}), method "
        f"{b.get('method') or NONE}, timings count: {counts}"
    ]
    if gate is None:
        return [*lines, "  gate: no verdict stored"]
    word = words.gate_word(bool(gate.get("accepted")))
    obj, req = gate.get("objective"), gate.get("required_gain")
    detail = f", {obj:.4f}x over {b.get('best', 'the best')}" if obj is not None else ""
    detail += f" (required {1 + req:.4f}x)" if req is not None else ""
    cat = "" if gate.get("accepted") else f" ({gate.get('category', NONE)})"
    return [*lines, f"  gate: {word}{cat}{detail}"]
