"""Equivalent rewrites of a correct kernel: the gate must accept every one (a rejection is
a false rejection, reported with its reason).

- Tunables: each module-level constant the task names in `[task] tunables` (the values the
  tuner sweeps, agents/tuner_sweep.py) moved one notch: a power of two halved or doubled
  (a block size no smaller than 16, warps no fewer than 1), `NUM_STAGES`-like counts ±1.
- `num_warps=` literals of launches halved and doubled: the schedule, never the values.
- Output buffers allocated with `torch.zeros*` instead of `torch.empty*`.
- Division by a reciprocal's product (`a / b` -> `a * (1.0 / b)` in a kernel): one more
  rounding, within any task's tolerance (fp32 arithmetic, <= 1.5 ulp more).

Reduction-order rewrites (two-pass vs online, tree vs sequential) are not generated: which
of them is safe depends on the kernel's structure (docs/gate-check.md)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from kernelloop.evaluate.gatecheck.edits import Source, Variant, is_launch


def _notches(name: str, value: int) -> list[int]:
    if "STAGE" in name.upper():
        return [v for v in (value - 1, value + 1) if v >= 1]
    if value < 1 or value & (value - 1):  # not a power of two: no safe notch known
        return []
    floor = 1 if "WARP" in name.upper() else 16
    return [v for v in (value // 2, value * 2) if v >= floor]


def tunables(src: Source, ctx: dict) -> Iterator[Variant]:
    names = set(ctx["tunables"])
    for node in src.tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in names
            and isinstance(node.value, ast.Constant)
            and type(node.value.value) is int
        ):
            name, value = node.targets[0].id, node.value.value
            for new in _notches(name, value):
                yield src.edit("tunable", node.value, str(new), f"{name} {value} -> {new}")


def num_warps(src: Source, ctx: dict) -> Iterator[Variant]:
    for n in src.host_nodes:
        if is_launch(n):
            for kw in n.keywords:
                if (
                    kw.arg == "num_warps"
                    and isinstance(kw.value, ast.Constant)
                    and type(kw.value.value) is int
                ):
                    for new in _notches("WARP", kw.value.value):
                        yield src.edit(
                            "num_warps",
                            kw.value,
                            str(new),
                            f"num_warps={kw.value.value} -> {new} (line {kw.value.lineno})",
                        )


def zeroed_buffers(src: Source, ctx: dict) -> Iterator[Variant]:
    spans = []
    for n in src.host_nodes:
        if isinstance(n, ast.Attribute) and n.attr in ("empty", "empty_like"):
            text = src.seg(n)
            start, end = src.span(n)
            spans.append((start, end, re.sub(r"empty(_like)?$", r"zeros\1", text)))
    if spans:
        line = min(
            n.lineno for n in src.host_nodes if getattr(n, "attr", "") in ("empty", "empty_like")
        )
        yield src.edit_spans("zeroed_buffers", line, spans, "torch.empty* -> torch.zeros*")


def reciprocal(src: Source, ctx: dict) -> Iterator[Variant]:
    for n in src.jit_nodes:
        if (
            isinstance(n, ast.BinOp)
            and isinstance(n.op, ast.Div)
            and not isinstance(n.right, ast.Constant)
            and not (isinstance(n.left, ast.Constant) and n.left.value == 1.0)
        ):
            a, b = src.seg(n.left), src.seg(n.right)
            new = f"({a}) * (1.0 / ({b}))"
            yield src.edit("reciprocal", n, new, f"`{a} / {b}` -> `{a} * (1.0 / {b})`")


EQUIVALENTS = {
    "tunable": tunables,
    "num_warps": num_warps,
    "zeroed_buffers": zeroed_buffers,
    "reciprocal": reciprocal,
}
