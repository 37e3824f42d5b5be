"""Tests of an inferred dropout mask for independence (issue 45): the dropped fraction
conditioned on the inputs and on the position, the masks of rows and columns at many lags
and of random pairs, and the masks of two related seeds on the same inputs (shifted too).

Every test counts Bernoulli events that are independent under the null hypothesis (an
honest mask: each element dropped with probability p, independently of everything else,
including the inputs and the mask of any other seed) and rejects when the Chernoff bound on
the two-sided tail is below ALPHA. The Chernoff bound is an upper bound on the exact tail
(no normal approximation), so each test's false-alarm probability is at most ALPHA on an
honest kernel whatever n and p are; an evaluation runs at most a few 10^4 of them
(docs/evaluate.md, "The stochastic suite"), so its false alarms stay below 1e-7.
Pairs of elements of one mask are compared only where no element is in two pairs (pairs
that share an element are dependent: their count's variance is not the binomial one).
"""

from __future__ import annotations

import math
import secrets

import torch

from kernelloop.evaluate.trusted.values.compare import CHUNK

ALPHA = 1e-12  # each test's false-alarm bound (two-sided)
_LOG_HALF_ALPHA = math.log(ALPHA / 2)
ROW_LAGS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 128, 256, 512, 1024)
COL_LAGS = (*ROW_LAGS, 2048, 4096, 8192, 16384)
RANDOM_LAGS = 3  # drawn per call beside the listed ones
SHIFTS = (1, 2, 3, 4, 8, 16, 32, 64)  # row and column shifts between related seeds' masks
QUANTILE_SAMPLE = 1 << 20  # elements the strata's cut points are taken from
# Pairs of elements one lag or shift test compares at most: whole rows (or columns) drawn
# at random up to this many elements. Identical masks show in a handful of pairs and a
# 1-point shift of a 10% rate in ~1e5; each test comparing every pair of a GPU-sized mask
# (134M elements) made the H200's honest flagship evaluation 50% slower (issue 45, 30 s ->
# 46 s) and cost 10 s a call on the CPU at 4096x8192. Whole lines keep a dependence
# confined to some rows or columns visible in proportion.
MAX_PAIRS = 1 << 22


def log_tail(count: int, parts: list[tuple[int, float]]) -> float:
    """The log of the Chernoff bound on P(X >= count) when count is above X's mean, else on
    P(X <= count), for X a sum of independent Binomial(n, p) over `parts` (0 when count is
    the mean; -inf when X cannot reach count)."""
    parts = [(n, p) for n, p in parts if n > 0]
    mean = sum(n * p for n, p in parts)
    lo = sum(n for n, p in parts if p >= 1.0)
    hi = sum(n for n, p in parts if p > 0.0)
    if count < lo or count > hi:
        return -math.inf
    if count == mean:
        return 0.0
    if len(parts) == 1 and 0.0 < parts[0][1] < 1.0:
        n, p = parts[0]
        return -n * _kl(count / n, p)
    if count == 0:
        return sum(n * math.log1p(-p) for n, p in parts)
    total = sum(n for n, _ in parts)
    if count == total:
        return sum(n * math.log(p) for n, p in parts)

    def g(t: float) -> float:  # log E[e^{tX}] - t·count, convex; its minimum is the bound
        return sum(n * math.log1p(p * math.expm1(t)) for n, p in parts) - t * count

    a, b = (0.0, 40.0) if count > mean else (-40.0, 0.0)
    for _ in range(48):  # golden-section search on the convex g (40·0.618^48 < 1e-8)
        c, d = b - 0.618 * (b - a), a + 0.618 * (b - a)
        if g(c) < g(d):
            b = d
        else:
            a = c
    return min(0.0, g((a + b) / 2))


def _kl(q: float, p: float) -> float:
    """KL(Bernoulli(q) || Bernoulli(p))."""
    out = 0.0
    if q > 0:
        out += q * math.log(q / p)
    if q < 1:
        out += (1 - q) * math.log((1 - q) / (1 - p))
    return out


def rejects(count: int, parts: list[tuple[int, float]]) -> bool:
    return log_tail(count, parts) <= _LOG_HALF_ALPHA


def _fraction(count: int, n: int, expect: float, what: str) -> str:
    return f"{what} {count / n:.4f} over {n} (expected {expect:.4f}; tail bound < {ALPHA:g})"


def _cuts(values: torch.Tensor, valid: torch.Tensor, k: int) -> list[float] | None:
    """k-1 cut points splitting the `valid` ones of `values` (1-D) into k parts of about
    equal size (sorted with the others last: boolean indexing cost ~85 ms a call on the
    loaded 2-core CPU), None where fewer than 8 are valid."""
    n = int(valid.sum().item())
    if n < 8:
        return None
    s = torch.where(valid, values.double(), math.inf).sort().values
    return [float(s[(j * n) // k].item()) for j in range(1, k)]


def _sizes(keep: torch.Tensor, drop: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"|the random term|": (keep - drop).abs(), "|the dropped value|": drop.abs()}


def strata_counts(
    dropped: torch.Tensor, dec: torch.Tensor, ref_keep: torch.Tensor, ref_drop: torch.Tensor
) -> dict[str, tuple[int, int]]:
    """{stratum label: (decidable elements, dropped among them)} for every stratum the
    dropped fraction is tested in: the sign of the dropped value (the residual) and of the
    random term, the quartiles of each's size (cut points from a strided sample of at most
    QUANTILE_SAMPLE decidable elements), four row blocks and four column blocks, the last
    row and the columns past the last multiple of 64. The labels name the same stratum in
    every call (they are pooled across calls). Computed a block of rows at a time
    (CHUNK elements), so the float64 temporaries stay small on a GPU-sized output."""
    if dec.numel() == 0:
        return {}
    cols = dec.shape[-1] if dec.dim() else 1
    rows = dec.numel() // cols
    d2, c2 = dropped.reshape(rows, cols), dec.reshape(rows, cols)
    k2, r2 = ref_keep.reshape(rows, cols), ref_drop.reshape(rows, cols)
    step = max(1, dec.numel() // QUANTILE_SAMPLE)
    sample = c2.reshape(-1)[::step]
    picked = _sizes(k2.reshape(-1)[::step], r2.reshape(-1)[::step])
    cuts = {}
    for name, v in picked.items():
        got = _cuts(v, sample & torch.isfinite(v), 4)
        if got is not None:
            cuts[name] = [-math.inf, *got, math.inf]
    col = torch.arange(cols, device=dec.device)
    col_parts = [(f"column block {b + 1} of 4", col * 4 // cols == b) for b in range(4)]
    if cols < 4:
        col_parts = []
    if cols > 64 and cols % 64:
        col_parts.append(("the columns past the last multiple of 64", col >= cols - cols % 64))
    counts: dict[str, list[int]] = {}

    def add(label: str, part: torch.Tensor, dd: torch.Tensor, cc: torch.Tensor) -> None:
        sel = part & cc
        cell = counts.setdefault(label, [0, 0])
        cell[0] += int(torch.count_nonzero(sel).item())
        cell[1] += int(torch.count_nonzero(dd & sel).item())

    per = max(1, CHUNK // cols)
    for r0 in range(0, rows, per):
        dd, cc = d2[r0 : r0 + per], c2[r0 : r0 + per]
        kk, rr = k2[r0 : r0 + per], r2[r0 : r0 + per]
        term = kk - rr
        add("the dropped value < 0", rr < 0, dd, cc)
        add("the dropped value >= 0", rr >= 0, dd, cc)
        add("the random term < 0", term < 0, dd, cc)
        add("the random term >= 0", term >= 0, dd, cc)
        for name, size in _sizes(kk, rr).items():
            if name in cuts:
                cut = cuts[name]
                for q in range(4):
                    hi = size < cut[q + 1] if q < 3 else torch.ones_like(cc)
                    add(f"{name} in its quartile {q + 1}", (size >= cut[q]) & hi, dd, cc)
        row = torch.arange(r0, min(r0 + per, rows), device=dec.device).reshape(-1, 1)
        if rows >= 4:
            for b in range(4):
                add(f"row block {b + 1} of 4", row * 4 // rows == b, dd, cc)
        if rows > 1:
            add("the last row", row == rows - 1, dd, cc)
        for label, part in col_parts:
            add(label, part, dd, cc)
    return {label: (n, k) for label, (n, k) in counts.items() if n}


def strata_problem(counts: dict[str, tuple[int, int]], p: float) -> str | None:
    """Why the dropped fraction in some stratum does not fit p, or None."""
    for label, (n, k) in counts.items():
        if rejects(k, [(n, p)]):
            return _fraction(k, n, p, "dropped fraction") + f" where {label}"
    return None


def pooled_problem(pool: dict[str, dict[float, list[int]]]) -> str | None:
    """The same strata over every call so far (`pool`: label -> {p: [n, dropped]}): a rate
    that depends on the inputs a little is seen in the sum of the calls."""
    for label, by_p in pool.items():
        parts = [(n, p) for p, (n, _) in by_p.items()]
        k = sum(c for _, c in by_p.values())
        n = sum(n for n, _ in parts)
        if rejects(k, parts):
            mean = sum(n * p for n, p in parts) / n
            return _fraction(k, n, mean, "over the calls so far, the dropped fraction") + (
                f" where {label}"
            )
    return None


def _disjoint(n: int, lag: int, device, keep: int | None = None) -> torch.Tensor:
    """Indices i with i + lag < n such that no index is in two pairs (i, i + lag); at most
    `keep` of them, drawn at random (sorted)."""
    i = torch.arange(n, device=device)
    i = i[((i // lag) % 2 == 0) & (i + lag < n)]
    return _some(i, keep)


def _some(i: torch.Tensor, keep: int | None) -> torch.Tensor:
    """At most `keep` of the indices `i`, drawn at random (not the global RNG), in order."""
    if keep is None or i.numel() <= keep:
        return i
    gen = torch.Generator().manual_seed(secrets.randbits(63))
    pick = torch.randperm(i.numel(), generator=gen)[:keep].sort().values
    return i.index_select(0, pick.to(i.device))


def _lines(other: int) -> int:
    """How many whole lines of `other` elements one test takes (MAX_PAIRS)."""
    return max(1, MAX_PAIRS // max(other, 1))


def _differ(a, da, b, db, p: float) -> tuple[int, int, bool]:
    both = da & db
    m = int(torch.count_nonzero(both).item())
    k = int(torch.count_nonzero((a != b) & both).item())
    return m, k, m > 0 and rejects(k, [(m, 2 * p * (1 - p))])


def lags_problem(dropped: torch.Tensor, dec: torch.Tensor, p: float) -> str | None:
    """Why the masks of rows (or columns) `lag` apart, or of random pairs of rows (or
    columns), look dependent, or None: for independent masks the fraction of pairs that
    differ fits 2p(1-p). Lags: ROW_LAGS / COL_LAGS and RANDOM_LAGS drawn now."""
    if dropped.dim() == 0 or dropped.numel() < 2:
        return None
    cols = dropped.shape[-1]
    d, dd = dropped.reshape(-1, cols), dec.reshape(-1, cols)
    rng = secrets.SystemRandom()
    for axis, name, listed in ((0, "rows", ROW_LAGS), (1, "columns", COL_LAGS)):
        n, keep = d.shape[axis], _lines(d.shape[1 - axis])
        if n < 2:
            continue
        lags = [g for g in listed if g < n]
        lags += [rng.randrange(1, n) for _ in range(RANDOM_LAGS)]
        for lag in lags:
            i = _disjoint(n, lag, d.device, keep)
            a, da = d.index_select(axis, i), dd.index_select(axis, i)
            b, db = d.index_select(axis, i + lag), dd.index_select(axis, i + lag)
            m, k, bad = _differ(a, da, b, db, p)
            if bad:
                return f"the masks of {name} {lag} apart must be independent; " + _fraction(
                    k, m, 2 * p * (1 - p), "differing fraction"
                )
        gen = torch.Generator().manual_seed(rng.getrandbits(63))  # not the global RNG
        perm = torch.randperm(n, generator=gen).to(d.device)
        half = min(n // 2, keep)
        i, j = perm[:half], perm[half : 2 * half]
        m, k, bad = _differ(
            d.index_select(axis, i), dd.index_select(axis, i),
            d.index_select(axis, j), dd.index_select(axis, j), p,
        )  # fmt: skip
        if bad:
            return f"the masks of random pairs of {name} must be independent; " + _fraction(
                k, m, 2 * p * (1 - p), "differing fraction"
            )
    return None


def related_problem(
    a: torch.Tensor, da: torch.Tensor, b: torch.Tensor, db: torch.Tensor, p: float, how: str
) -> str | None:
    """Why the masks of two related seeds (`how`: "seed + 1", …) on the same inputs look
    dependent, or None: at the same place, and with one shifted by SHIFTS rows or columns
    (a generator keyed on seed + row makes seed s+1's mask seed s's shifted a row). Each
    element of either mask is in one pair at most, so the pairs are independent under
    the null hypothesis."""
    if a.dim() == 0:
        a, da, b, db = (t.reshape(1, 1) for t in (a, da, b, db))
    cols = a.shape[-1]
    a, da, b, db = (t.reshape(-1, cols) for t in (a, da, b, db))
    rows = a.shape[0]
    shifts = [(0, 0)]
    for s in SHIFTS:
        shifts += [(r, c) for r, c in ((s, 0), (-s, 0)) if s < rows]
        shifts += [(r, c) for r, c in ((0, s), (0, -s)) if s < cols]
    keep = _lines(cols)
    for dr, dc in shifts:
        # Rows r of a against rows r - dr of b (whole rows, at most MAX_PAIRS elements).
        ra = _some(torch.arange(max(dr, 0), rows + min(dr, 0), device=a.device), keep)
        rb = ra - dr
        ca, cb = slice(max(dc, 0), cols + min(dc, 0)), slice(max(-dc, 0), cols + min(-dc, 0))
        a_, da_ = a.index_select(0, ra)[:, ca], da.index_select(0, ra)[:, ca]
        b_, db_ = b.index_select(0, rb)[:, cb], db.index_select(0, rb)[:, cb]
        m, k, bad = _differ(a_, da_, b_, db_, p)
        if bad:
            where = "" if (dr, dc) == (0, 0) else f" shifted by ({dr}, {dc}) (rows, columns)"
            return (
                f"the masks of seeds related by {how} must be independent; the two masks"
                f"{where}: " + _fraction(k, m, 2 * p * (1 - p), "differing fraction")
            )
    return None
