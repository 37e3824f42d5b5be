"""`kernelloop bench`: time a candidate against the best/baseline and print the per-shape table."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelloop.commands.candidate_file import check_candidate_file
from kernelloop.commands.labels import print_rejection
from kernelloop.commands.progress import progress_lines
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.protocol import COMPILED
from kernelloop.task import load_task, words


def register(app: typer.Typer) -> None:
    app.command("bench")(bench_cmd)


def bench_cmd(
    task: Annotated[Path, typer.Argument(metavar="TASK", help="task folder (with task.toml)")],
    candidate: Annotated[
        Path,
        typer.Argument(
            metavar="CANDIDATE",
            help="candidate .py file (a cuda task: or a .cu/.cpp source binding it with "
            "PYBIND11_MODULE)",
        ),
    ],
    against: Annotated[
        list[Path] | None,
        typer.Option("--against", help="another implementation to time beside it (repeatable)"),
    ] = None,
    best: Annotated[
        Path | None,
        typer.Option(
            help="the current best: the gate compares the candidate with it (default: the baseline)"
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    shapes: Annotated[
        str | None,
        typer.Option(
            help="cpu | gpu | all | comma-separated labels (default: the device's shapes)"
        ),
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="dtype to time (default: the task's first)")
    ] = None,
    sandbox: Annotated[
        str, typer.Option(help="auto (= bwrap) | bwrap | none (no isolation: see docs/security.md)")
    ] = "auto",
    json_out: Annotated[
        bool, typer.Option("--json", help="print the benchmark record as JSON")
    ] = False,
    record: Annotated[
        Path | None, typer.Option(help="also write the benchmark record (JSON) to this file")
    ] = None,
    no_aa: Annotated[bool, typer.Option("--no-aa", help="skip the A/A noise slot")] = False,
    compiled: Annotated[
        bool,
        typer.Option(
            "--compiled",
            help="also time the task's reference under torch.compile (evidence: the "
            "speedup over torch.compile; never the gate's)",
        ),
    ] = False,
) -> None:
    """Time CANDIDATE, the best and the baseline interleaved, each in its own sandboxed
    worker; print per-shape medians, speedups, noise and roofline position.
    Exit 0 if it is faster by the performance gate's margin, 1 if not, 2 usage or setup error."""
    from kernelloop.evaluate.trusted.bench import benchmark
    from kernelloop.gate import performance_gate

    t = load_task(task)
    for path in [candidate, *(against or []), *([best] if best else [])]:
        check_candidate_file(path, "implementation")
    named = _against_names(against or [])
    err = Console(stderr=True)
    with progress_lines(err, "benchmarking…") as say:
        rec = benchmark(
            t,
            candidate,
            best=best,
            against=named,
            device=device,
            shapes=shapes,
            dtype=dtype,
            sandbox=sandbox,
            aa=not no_aa,
            compiled=compiled,
            progress=say,
        )
    if record is not None:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(rec.model_dump_json(indent=2) + "\n")
    verdict = performance_gate(rec, t.spec.rules)
    if json_out:
        sys.stdout.write(rec.model_dump_json(indent=2) + "\n")
    else:
        console = Console()
        print_bench(rec, verdict, console if console.is_terminal else Console(width=160))
    raise typer.Exit(0 if verdict.accepted else 1)


def _against_names(files: list[Path]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for f in files:
        base = re.sub(r"[^A-Za-z0-9_]", "_", f.stem) or "impl"
        if base in ("candidate", "baseline", "best") or base.endswith("#aa"):
            base = f"against_{base}"
        name, k = base, 2
        while name in out:
            name, k = f"{base}_{k}", k + 1
        out[name] = f
    if any(not f.is_file() for f in files):
        bad = next(f for f in files if not f.is_file())
        raise KernelloopError(f"--against file {bad} does not exist; pass the path of a .py file.")
    return out


def speedup_lines(rec) -> list[str]:
    """The candidate's overall speedups over eager (the baseline) and torch.compile, and
    where the compiled slot was asked for, what became of it."""
    if rec.speedup_vs_baseline is None and rec.compiled is None:
        return []
    base = f"{rec.speedup_vs_baseline:.3f}x" if rec.speedup_vs_baseline is not None else "-"
    line = f"speedup (weighted geomean): {base} over the baseline"
    if rec.compiled is not None:
        comp = f"{rec.speedup_vs_compiled:.3f}x" if rec.speedup_vs_compiled is not None else "-"
        line += f", {comp} over torch.compile (evidence only, not the gate's)"
    out = [line]
    c = rec.compiled
    if c is not None:
        took = ", ".join(f"{k} {v:.1f} s" for k, v in c.prepare_s.items()) or "-"
        out.append(
            f"compiled slot: {c.source} under torch.compile (mode {c.mode}, dynamic={c.dynamic}); "
            f"compile + warm-up per shape (untimed): {took}"
            + (
                f"; dropped: {c.dropped}"
                if c.dropped
                else "; 0 recompiles while timed"
                + ("; outputs checked against eager" if c.eager_checked else "")
            )
        )
    for sb in rec.shapes if c is not None and c.in_turn else []:
        if (t := sb.compiled_in_turn) is None:
            continue
        line = (
            f"{sb.shape}: compiled slot timed in turn beside the baseline alone: baseline "
            f"{t.baseline_ms:.4f} ms, compiled {t.compiled_ms:.4f} ms "
            f"({t.baseline_vs_compiled:.3f}x)"
        )
        if sb.speedup_vs_compiled:
            vs_base = sb.speedup_vs_compiled / t.baseline_vs_compiled
            line += f"; x compiled = x baseline {vs_base:.3f} * {t.baseline_vs_compiled:.3f}"
        out.append(line)
    return out


def print_bench(rec, verdict, console: Console) -> None:
    console.print(
        f"[bold]{rec.task}[/] · {Path(rec.candidate).name} vs {rec.best} · {rec.device_name} "
        f"({rec.device}) · {rec.torch} · sandbox={rec.sandbox} · {rec.wall_s:.1f} s"
    )
    if rec.static_findings:  # nothing ran: no timing table to show
        print_rejection(console, verdict.category, verdict.reasons, note=" (not benchmarked)")
        return
    console.print(f"method: {rec.method or '-'}", markup=False)
    if rec.memory is not None:
        console.print(rec.memory.line(), markup=False, soft_wrap=True)
    for g in rec.gpu_state:
        console.print(
            f"clocks {g.when}: SM {g.sm_clock_mhz} MHz, mem {g.mem_clock_mhz} MHz, "
            f"throttle {g.throttle_reasons}, {g.temperature_c} C, {g.power_w} W"
        )
    for w in rec.warnings + verdict.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(w)}", soft_wrap=True)
    names = ["candidate"] + ([rec.best] if rec.best != "baseline" else []) + ["baseline"]
    names += [COMPILED] if rec.compiled else []
    others = sorted({n for s in rec.shapes for n in s.impls} - set(names) - {f"{rec.aa_impl}#aa"})
    title = "median ms" + ("" if rec.timings_count else " (interpreter: does not count)")
    table = Table(
        "shape",
        "tag",
        "w",
        *names,
        *others,
        "cand p20–p80",
        "× best",
        "× base",
        *(["× compiled"] if rec.compiled else []),
        "noise",
        "% floor",
        title=title,
    )
    by_shape = {g.shape: g for g in verdict.shapes}
    for s in rec.shapes:
        cells = []
        for n in names + others:
            it = s.impls.get(n)
            cells.append(f"{it.median_ms:.4f}" if it else "-")
        g = by_shape.get(s.shape)
        cand = s.impls.get("candidate")
        table.add_row(
            s.shape,
            s.tag,
            f"{s.weight:g}",
            *cells,
            f"{cand.p20_ms:.4f}–{cand.p80_ms:.4f}" if cand else "-",
            f"{g.speedup_vs_best:.3f}" if g and g.speedup_vs_best else "-",
            f"{g.speedup_vs_baseline:.3f}" if g and g.speedup_vs_baseline else "-",
            *(
                [f"{s.speedup_vs_compiled:.3f}" if s.speedup_vs_compiled else "-"]
                if rec.compiled
                else []
            ),
            f"{s.noise_rel:.2%}",
            f"{cand.pct_of_floor:.1f}" if cand and cand.pct_of_floor else "-",
        )
    console.print(table)
    for s in rec.shapes:  # what the trusted clock saw, and why a candidate was raised
        if s.clock is not None:
            console.print(s.clock.line(s.shape), markup=False, soft_wrap=True)  # one greppable line
    for line in speedup_lines(rec):
        console.print(line, markup=False, soft_wrap=True)  # whole lines, to be grepped
    if verdict.objective is not None:
        console.print(
            f"objective: weighted geomean {verdict.objective:.4f}x over {rec.best}; "
            f"required {1 + (verdict.required_gain or 0):.4f}x (noise {verdict.noise_rel:.2%})"
        )
    if verdict.accepted:
        console.print(
            f"[bold green]{words.FASTER_HEADLINE}[/] "
            "(not judged for correctness here: `kernelloop evaluate` does that)"
        )
    else:
        print_rejection(console, verdict.category, verdict.reasons)
