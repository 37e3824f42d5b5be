"""Synthetic benchmark records for gate logic tests (the real-timing tests live in
test_bench_cpu.py)."""

from kernelloop.evaluate.trusted.bench import BenchmarkRecord, ImplTiming, ShapeBench, noise

SHAPES = [
    ("256x1024", 0.5, "common"),
    ("512x512", 0.3, "common"),
    ("2048x16", 0.1, "long_tail"),
    ("8x16384", 0.1, "long_tail"),
]


def timing(
    name: str, ms: float, spread: float = 0.01, n: int = 100, prof: float | None = None
) -> ImplTiming:
    return ImplTiming(
        impl=name,
        median_ms=ms,
        p20_ms=ms * (1 - spread),
        p80_ms=ms * (1 + spread),
        n=n,
        method="test",
        profiler_ms=prof,
        samples_ms=[ms],
    )


def record(
    cand: dict[str, float],
    best: dict[str, float] | None = None,
    base: dict[str, float] | None = None,
    *,
    device: str = "cuda",
    counts: bool = True,
    spread: float = 0.01,
    aa_diff: float = 0.0,
    prof: dict[str, tuple[float, float]] | None = None,
    **kw,
) -> BenchmarkRecord:
    best_name = "best" if best is not None else "baseline"
    base = base or {s: 1.0 for s, _, _ in SHAPES}
    shapes = []
    for label, w, tag in SHAPES:
        pc, pb = (prof or {}).get(label, (None, None))
        impls = {
            "candidate": timing("candidate", cand[label], spread, prof=pc),
            "baseline": timing("baseline", base[label], spread, prof=pb if best is None else None),
        }
        ref = best[label] if best is not None else base[label]
        if best is not None:
            impls["best"] = timing("best", best[label], spread, prof=pb)
        impls[f"{best_name}#aa"] = timing(f"{best_name}#aa", ref * (1 + aa_diff), spread)
        sb = ShapeBench(shape=label, dtype="bfloat16", weight=w, tag=tag, impls=impls)
        sb.noise_rel, sb.aa_rel_diff = noise(sb, best_name, best_name)
        shapes.append(sb)
    fields = dict(
        task="t",
        task_digest="d",
        language="triton",
        candidate="c.py",
        candidate_sha256="abc",
        impl_sha256={},
        best=best_name,
        started_at="now",
        wall_s=1.0,
        device=device,
        device_name="H200",
        torch="2.11",
        python="3.12",
        sandbox="bwrap",
        interpreter=not counts,
        aa_impl=best_name,
        timings_count=counts,
        shapes=shapes,
    )
    fields.update(kw)
    return BenchmarkRecord(**fields)


def uniform(v: float) -> dict[str, float]:
    return {s: v for s, _, _ in SHAPES}
