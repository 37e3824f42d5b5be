"""The careless engineer's mutation operators (issue 45): the bugs a person writing a
norm or dropout kernel actually makes, as one-hunk source edits of a Triton kernel.

- `eps_misplaced`: eps dropped, eps outside the square root, eps hard-coded (to the task's
  own value and to a tenth of it);
- `affine_ignored`: the weight or the bias load replaced by 1 / 0, the weight's |w|, the
  bias's last element dropped;
- `tail_beyond`: columns past 1024 or 16384 ignored, rows past 128 never written;
- `offsets_32bit`: the `.to(tl.int64)` of a program id dropped (offsets in 32 bits);
- `seed_misuse` (stochastic tasks): the seed truncated to 16 bits, keyed on seed + row, a
  mask periodic over 16 rows (or 4096 elements), a data-dependent rate (1.5p where an input
  is negative, 0.5p elsewhere), the seed ignored after the 400th call of a process.

Which of these a gate kills depends on its inputs (eps, weights, sizes, seeds drawn from
the op's real domain): a survivor is reported, never excluded (report.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from kernelloop.evaluate.gatecheck.edits import Source, Variant, call_name
from kernelloop.evaluate.gatecheck.mutants import RNG_CALLS


def _eps_names(ctx: dict) -> set[str]:
    return {k for k, v in ctx["params"].items() if isinstance(v, float) and "eps" in k.lower()}


def eps_misplaced(src: Source, ctx: dict) -> Iterator[Variant]:
    names = _eps_names(ctx)
    if not names:
        return
    value = next(v for k, v in ctx["params"].items() if k in names)
    for n in src.jit_nodes:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            sides = [n.left, n.right]
            for k, side in enumerate(sides):
                if isinstance(side, ast.Name) and side.id in names:
                    other = src.seg(sides[1 - k])
                    yield src.edit("eps_misplaced", n, f"({other})", f"eps dropped: `{src.seg(n)}`")
        if isinstance(n, ast.Call) and call_name(n) in ("sqrt", "sqrt_rn", "rsqrt") and n.args:
            arg = n.args[0]
            if (
                isinstance(arg, ast.BinOp)
                and isinstance(arg.op, ast.Add)
                and isinstance(arg.right, ast.Name)
                and arg.right.id in names
            ):
                fn = src.seg(n.func)
                new = f"({fn}({src.seg(arg.left)}) + {arg.right.id})"
                yield src.edit("eps_misplaced", n, new, f"eps outside the sqrt: `{new}`")
        if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load):
            yield src.edit("eps_misplaced", n, repr(value), f"eps hard-coded to {value!r}")
            tenth = format(value / 10, "g")
            yield src.edit("eps_misplaced", n, tenth, f"eps hard-coded to {tenth}")


def _loads(src: Source) -> Iterator[tuple[ast.Assign, ast.Call, str]]:
    """`v = tl.load(p_ptr + offs, ...)...` in a kernel: the assignment, the load, `p_ptr`."""
    for n in src.jit_nodes:
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1):
            continue
        load = next(
            (c for c in ast.walk(n.value) if isinstance(c, ast.Call) and call_name(c) == "load"),
            None,
        )
        if load is None or not load.args:
            continue
        ptr = next(
            (x.id for x in ast.walk(load.args[0]) if isinstance(x, ast.Name) and "ptr" in x.id),
            None,
        )
        if ptr is not None:
            yield n, load, ptr


def _is(ptr: str, *heads: str) -> bool:
    p = ptr.lower().removesuffix("_ptr")
    return any(p == h or p.startswith(h + "_") for h in heads)


def _mask_compare(src: Source, load: ast.Call) -> tuple[str, str] | None:
    """(`offs`, `cols`) of the load's `mask=offs < cols` (directly or through a name)."""
    mask = next((kw.value for kw in load.keywords if kw.arg == "mask"), None)
    if isinstance(mask, ast.Name):
        mask = next(
            (
                n.value
                for n in src.jit_nodes
                if isinstance(n, ast.Assign)
                and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name)
                and n.targets[0].id == mask.id
            ),
            None,
        )
    if isinstance(mask, ast.Compare) and len(mask.ops) == 1 and isinstance(mask.ops[0], ast.Lt):
        return src.seg(mask.left), src.seg(mask.comparators[0])
    return None


def affine_ignored(src: Source, ctx: dict) -> Iterator[Variant]:
    for n, load, ptr in _loads(src):
        rhs = src.seg(n.value)
        if _is(ptr, "w", "weight", "gamma"):
            yield src.edit("affine_ignored", n.value, "1.0", f"weight ignored (`{ptr}`)")
            yield src.edit("affine_ignored", n.value, f"tl.abs({rhs})", f"|w| used (`{ptr}`)")
        elif _is(ptr, "b", "bias", "beta"):
            yield src.edit("affine_ignored", n.value, "0.0", f"bias ignored (`{ptr}`)")
            if (mc := _mask_compare(src, load)) is not None:
                offs, cols = mc
                new = f"tl.where({offs} < {cols} - 1, {rhs}, 0.0)"
                yield src.edit("affine_ignored", n.value, new, "bias's last element dropped")


def _row_names(f: ast.FunctionDef) -> list[str]:
    """Names a kernel assigns its row from: `row = tl.program_id(0)...` (no arange)."""
    out = []
    for n in ast.walk(f):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            calls = [call_name(c) for c in ast.walk(n.value) if isinstance(c, ast.Call)]
            if "program_id" in calls and "arange" not in calls:
                out.append(n.targets[0].id)
    return out


def tail_beyond(src: Source, ctx: dict) -> Iterator[Variant]:
    for f in src.jit_functions:
        rows = _row_names(f)
        for n in ast.walk(f):
            if not (
                isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.Lt)
            ):
                continue
            a, text = src.seg(n.left), src.seg(n)
            for size in (1024, 16384):
                new = f"({text}) & ({a} < {size})"
                yield src.edit("tail_beyond", n, new, f"elements past {size} ignored (`{text}`)")
            for row in rows[:1]:
                new = f"({text}) & ({row} < 128)"
                yield src.edit("tail_beyond", n, new, f"rows past 128 never written (`{text}`)")


def offsets_32bit(src: Source, ctx: dict) -> Iterator[Variant]:
    for n in src.jit_nodes:
        if (
            isinstance(n, ast.Call)
            and call_name(n) == "to"
            and isinstance(n.func, ast.Attribute)
            and n.args
            and src.seg(n.args[0]).endswith("int64")
        ):
            inner = src.seg(n.func.value)
            yield src.edit("offsets_32bit", n, inner, f"`{src.seg(n)}` -> 32-bit `{inner}`")


def seed_misuse(src: Source, ctx: dict) -> Iterator[Variant]:
    if not ctx.get("seed"):
        return
    loaded = list(_loads(src))
    for n in src.jit_nodes:
        if isinstance(n, ast.Call) and call_name(n) in RNG_CALLS and len(n.args) >= 2:
            seed, offs = n.args[0], n.args[1]
            s, o = src.seg(seed), src.seg(offs)
            yield src.edit("seed_misuse", seed, f"({s}) & 0xFFFF", "seed truncated to 16 bits")
            if (
                isinstance(offs, ast.BinOp)
                and isinstance(offs.op, ast.Add)
                and isinstance(offs.left, ast.BinOp)
                and isinstance(offs.left.op, ast.Mult)
            ):
                row, width, col = (
                    src.seg(x) for x in (offs.left.left, offs.left.right, offs.right)
                )
                yield src.edit(
                    "seed_misuse",
                    n,
                    f"{src.seg(n.func)}({s} + {row}, {col})",
                    "keyed on seed + row",
                )
                yield src.edit(
                    "seed_misuse",
                    offs,
                    f"({row} % 16) * {width} + {col}",
                    "mask periodic over 16 rows",
                )
            else:
                yield src.edit(
                    "seed_misuse", offs, f"({o}) % 4096", "mask periodic (4096 elements)"
                )
    # a data-dependent rate: 1.5p where a loaded input is negative, 0.5p elsewhere
    for n in src.jit_nodes:
        if not (isinstance(n, ast.Compare) and len(n.ops) == 1):
            continue
        sides = [n.left, n.comparators[0]]
        for k, side in enumerate(sides):
            if isinstance(side, ast.Call) and call_name(side) in RNG_CALLS:
                before = [(a, p) for a, _l, p in loaded if a.lineno < n.lineno]
                pick = next((a for a, p in before if _is(p, "r", "res", "residual")), None)
                pick = pick or (before[0][0] if before else None)
                if pick is not None and isinstance(pick.targets[0], ast.Name):
                    v, rate = pick.targets[0].id, src.seg(sides[1 - k])
                    new = f"tl.where({v} < 0, ({rate}) * 1.5, ({rate}) * 0.5)"
                    yield src.edit(
                        "seed_misuse", sides[1 - k], new, f"rate depends on `{v}`'s sign"
                    )
    yield from _call_count_drift(src, ctx)


def _call_count_drift(src: Source, ctx: dict) -> Iterator[Variant]:
    """The entry ignores its seed after its 400th call in a process (a counter it keeps)."""
    seed = ctx["seed"]
    for f in src.tree.body:
        if isinstance(f, ast.FunctionDef) and f.name == ctx["entry"]:
            names = {a.arg for a in [*f.args.args, *f.args.kwonlyargs]}
            if seed not in names or not f.body:
                return
            first = f.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                first = f.body[1] if len(f.body) > 1 else None
            if first is None:
                return
            start, _ = src.span(first)
            pad = " " * first.col_offset
            code = f"_CALLS.append(1)\n{pad}if len(_CALLS) > 400:\n{pad}    {seed} = 0\n{pad}"
            fstart, _ = src.span(f.decorator_list[0] if f.decorator_list else f)
            line_start = fstart - f.col_offset
            spans = [(start, start, code), (line_start, line_start, "_CALLS = []\n\n\n")]
            yield src.edit_spans(
                "seed_misuse", f.lineno, spans, "the seed ignored after the 400th call"
            )
            return


CARELESS = {
    "eps_misplaced": eps_misplaced,
    "affine_ignored": affine_ignored,
    "tail_beyond": tail_beyond,
    "offsets_32bit": offsets_32bit,
    "seed_misuse": seed_misuse,
}
