"""Mutation operators on a Triton kernel's Python source: each finds its sites with `ast`
and rewrites one site with a precise source edit (edits.Source), so a mutant is a
readable one-hunk diff. The wrapping operators (conditional shortcuts, output caching)
are in wrappers.py.

Every operator models a bug a real kernel has had or a shortcut an agent could take: a
mask one element too wide or too short, a tail tile or program skipped, a term dropped
from a sum (epsilon, bias, residual), a constant or scale wrong, two arguments swapped, a
reduction over the wrong axis, a dropout at the wrong rate or with correlated or fixed
random numbers."""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Iterator

from kernelloop import pyast
from kernelloop.evaluate.gatecheck.edits import Source, Variant, call_name, is_launch, names_in

RNG_CALLS = {"rand", "randn", "rand4x", "randn4x", "randint", "randint4x"}
_ATOMS = (ast.Name, ast.Attribute, ast.Constant, ast.Call, ast.Subscript, ast.BinOp)


def atom(src: Source, node: ast.AST) -> str:
    """`node`'s text, parenthesised unless `text - 1` parses as meant: names, calls and
    + - * / chains (left-associative, at or above binary minus's precedence, except the
    shifts and bitwise ops, parenthesised)."""
    text = src.seg(node)
    if isinstance(node, _ATOMS) and not (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.LShift | ast.RShift | ast.BitAnd | ast.BitOr | ast.BitXor)
    ):
        return text
    return f"({text})"


def mask_off_by_one(src: Source, ctx: dict) -> Iterator[Variant]:
    """`a < b` in a kernel -> `a <= b` (one element past the end) and `a < b - 1` (the
    last element never written)."""
    for n in src.jit_nodes:
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.Lt):
            a, b = src.seg(n.left), src.seg(n.comparators[0])
            short = f"{atom(src, n.comparators[0])} - 1"
            yield src.edit("mask_off_by_one", n, f"{a} <= {b}", f"`{a} < {b}` -> `<=`")
            yield src.edit("mask_off_by_one", n, f"{a} < {short}", f"`{a} < {b}` -> `< {short}`")


def tail_skipped(src: Source, ctx: dict) -> Iterator[Variant]:
    """A kernel loop's bound cut by one step (its last tile skipped); a launch's grid one
    program short; `triton.cdiv(n, B)` -> `n // B` (the partial tail block never runs)."""
    for n in src.jit_nodes:
        if isinstance(n, ast.Call) and call_name(n) in ("range", "static_range") and n.args:
            hi = n.args[1] if len(n.args) >= 2 else n.args[0]
            step = src.seg(n.args[2]) if len(n.args) >= 3 else "1"
            new = f"{atom(src, hi)} - {step}"
            yield src.edit("tail_skipped", hi, new, f"loop bound `{src.seg(hi)}` -> `{new}`")
    for n in src.host_nodes:
        if is_launch(n):
            grid = n.func.slice
            first = grid.elts[0] if isinstance(grid, ast.Tuple) and grid.elts else None
            if first is not None:
                g = src.seg(first)
                yield src.edit(
                    "tail_skipped", first, f"max({g} - 1, 1)", f"grid `{g}` one program short"
                )
        if isinstance(n, ast.Call) and call_name(n) == "cdiv" and len(n.args) == 2:
            a, b = (src.seg(x) for x in n.args)
            yield src.edit("tail_skipped", n, f"({a}) // ({b})", f"`cdiv({a}, {b})` rounds down")


def dropped_term(src: Source, ctx: dict) -> Iterator[Variant]:
    """One addend of a sum removed (`a + b` -> `a`, and -> `b`); `acc += t` -> `acc = t`.
    Pointer arithmetic is left alone (dropping an offset is tail_skipped's and
    swapped_args' business and mostly fails to compile)."""
    for n in src.jit_nodes + src.host_nodes:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            if any("ptr" in name for name in names_in(n)):
                continue
            a, b = src.seg(n.left), src.seg(n.right)
            yield src.edit("dropped_term", n, f"({a})", f"`{a} + {b}` -> `{a}`")
            yield src.edit("dropped_term", n, f"({b})", f"`{a} + {b}` -> `{b}`")
        elif isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add):
            t, v = src.seg(n.target), src.seg(n.value)
            yield src.edit("dropped_term", n, f"{t} = {v}", f"`{t} += {v}` -> `{t} = {v}`")


def wrong_constant(src: Source, ctx: dict) -> Iterator[Variant]:
    """A float constant in a kernel doubled (0.5 -> 1.0); `1.0 / x` -> `1.0` (a scale such
    as 1/(1-p) or 1/sqrt(var + eps) dropped); a float parameter passed to a launch scaled
    x10 (eps x10). `other=` fill values of masked loads are left alone: they are padding,
    and changing them is an equivalent mutant more often than not."""
    padding = {id(kw.value) for n in src.jit_nodes if isinstance(n, ast.Call) for kw in n.keywords}
    for n in src.jit_nodes:
        if (
            isinstance(n, ast.Constant)
            and isinstance(n.value, float)
            and n.value not in (0.0, 1.0)
            and id(n) not in padding
        ):
            yield src.edit("wrong_constant", n, repr(n.value * 2), f"{n.value} -> {n.value * 2}")
        if (
            isinstance(n, ast.BinOp)
            and isinstance(n.op, ast.Div)
            and isinstance(n.left, ast.Constant)
            and n.left.value == 1.0
        ):
            yield src.edit("wrong_constant", n, "1.0", f"scale `{src.seg(n)}` -> `1.0`")
    floats = {k for k, v in ctx["params"].items() if isinstance(v, float)} - {ctx["rate"]}
    for n in src.host_nodes:
        if is_launch(n):
            for a in n.args:
                if isinstance(a, ast.Name) and a.id in floats:
                    yield src.edit("wrong_constant", a, f"{a.id} * 10", f"`{a.id}` x10")


def swapped_args(src: Source, ctx: dict) -> Iterator[Variant]:
    """Two neighbouring arguments of a launch swapped (`(x, residual, ...)` ->
    `(residual, x, ...)`); the targets of `rows, cols = x.shape` swapped."""
    for n in src.host_nodes:
        if is_launch(n):
            args = [a for a in n.args if not isinstance(a, ast.Starred)]
            for a, b in zip(args, args[1:], strict=False):
                if src.seg(a) != src.seg(b):
                    sa, sb = src.seg(a), src.seg(b)
                    yield src.edit(
                        "swapped_args", a, sb, f"launch arguments `{sa}`, `{sb}` swapped", [(b, sa)]
                    )
        if (
            isinstance(n, ast.Assign)
            and isinstance(n.targets[0], ast.Tuple)
            and len(n.targets[0].elts) == 2
            and isinstance(n.value, ast.Attribute)
            and n.value.attr == "shape"
        ):
            a, b = n.targets[0].elts
            sa, sb = src.seg(a), src.seg(b)
            yield src.edit("swapped_args", a, sb, f"`{sa}, {sb} = ...shape` swapped", [(b, sa)])


def wrong_axis(src: Source, ctx: dict) -> Iterator[Variant]:
    """A reduction over the wrong axis: `axis=k` -> the other axis where the kernel has 2-D
    reductions (a 1-D kernel has one axis: its mutant would only fail to compile), and a
    host-side `dim=`."""
    axes = [
        kw
        for n in src.jit_nodes
        if isinstance(n, ast.Call)
        for kw in n.keywords
        if kw.arg == "axis" and isinstance(kw.value, ast.Constant)
    ]
    if any(kw.value.value == 1 for kw in axes):
        for kw in axes:
            if kw.value.value in (0, 1):
                new = str(1 - kw.value.value)
                yield src.edit("wrong_axis", kw.value, new, f"axis={kw.value.value} -> {new}")
    for n in src.host_nodes:
        if isinstance(n, ast.keyword) and n.arg == "dim" and isinstance(n.value, ast.Constant):
            new = "0" if n.value.value != 0 else "-1"
            yield src.edit("wrong_axis", n.value, new, f"dim={n.value.value} -> {new}")


def wrong_rng(src: Source, ctx: dict) -> Iterator[Variant]:
    """Dropout at the wrong rate (`rand(...) >= p` -> `>= p * 0.5`), random numbers shared
    by neighbouring elements (`rand(seed, offs)` -> `rand(seed, offs // 2)`), and the seed
    ignored (a fixed mask)."""
    for n in src.jit_nodes:
        if isinstance(n, ast.Compare) and len(n.ops) == 1:
            sides = [n.left, n.comparators[0]]
            for k, side in enumerate(sides):
                if isinstance(side, ast.Call) and call_name(side) in RNG_CALLS:
                    other = sides[1 - k]
                    o = src.seg(other)
                    yield src.edit(
                        "wrong_rng", other, f"({o}) * 0.5", f"dropout rate `{o}` -> `{o} * 0.5`"
                    )
        if isinstance(n, ast.Call) and call_name(n) in RNG_CALLS and len(n.args) >= 2:
            seed, offs = n.args[0], n.args[1]
            o = src.seg(offs)
            yield src.edit("wrong_rng", offs, f"({o}) // 2", f"`{o}` -> `{o} // 2` (correlated)")
            yield src.edit("wrong_rng", seed, "1234", f"seed `{src.seg(seed)}` ignored (fixed)")


OPERATORS: dict[str, Callable[[Source, dict], Iterator[Variant]]] = {
    "mask_off_by_one": mask_off_by_one,
    "tail_skipped": tail_skipped,
    "dropped_term": dropped_term,
    "wrong_constant": wrong_constant,
    "swapped_args": swapped_args,
    "wrong_axis": wrong_axis,
    "wrong_rng": wrong_rng,
}


def sample(variants: list[Variant], limit: int | None, seed: int = 0) -> list[Variant]:
    """At most `limit` variants, spread over the operators: round-robin in operator order,
    each operator's own sites in a seeded shuffle (the same seed, the same sample)."""
    by_op: dict[str, list[Variant]] = {}
    for v in variants:
        by_op.setdefault(v.operator, []).append(v)
    rng = random.Random(seed)
    for vs in by_op.values():
        rng.shuffle(vs)
    out: list[Variant] = []
    while any(by_op.values()) and (limit is None or len(out) < limit):
        for vs in by_op.values():
            if vs and (limit is None or len(out) < limit):
                out.append(vs.pop(0))
    return out


def unique(variants: list[Variant], original: str) -> list[Variant]:
    """Each distinct source once, none equal to the original, each one that parses."""
    seen = {original}
    out = []
    for v in variants:
        if v.source in seen:
            continue
        seen.add(v.source)
        try:
            pyast.parse(v.source)
        except SyntaxError:
            continue
        out.append(v)
    return out
