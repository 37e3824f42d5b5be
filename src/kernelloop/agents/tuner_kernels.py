"""Launch parameters per kernel, for a source that launches several Triton kernels.

The flagship's baseline launches three kernels (layer norm, softmax, dropout) that share
`NUM_WARPS`, and two of them `BLOCK_COLS`; a tuner that moves a shared literal moves all
three at once, and a value good for one kernel is bad for another (on the H200 three
rounds of single and paired moves from that baseline gained nothing: issue 35). The split
gives each kernel its own copy of every tunable it shares with another kernel —
`NUM_WARPS_LAYERNORM = 4` beside `NUM_WARPS = 4` — used in that kernel's launch (its grid
too), so the sweep can move each kernel's launch parameters on their own. The split alone
changes no value; it only travels with a move.

Only launches written `kernel[grid](...)` of a module-level `@triton.jit` function count,
and only module-level names a launch reads; every other byte stays as it was.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kernelloop import pyast

# A per-kernel copy's name: the shared tunable, then the kernel's name in capitals.
_TAG = re.compile(r"[^A-Za-z0-9]+")


@dataclass(frozen=True)
class Split:
    source: str  # the whole source with per-kernel copies
    copies: dict[str, tuple[str, ...]]  # shared tunable -> its per-kernel names
    tunables: tuple[str, ...]  # the names to tune after the split, in order

    def describe(self) -> str:
        return "; ".join(f"{t} -> {', '.join(names)}" for t, names in self.copies.items())


def line_offset(source: str, line_starts: list[int], lineno: int, col_bytes: int) -> int:
    """The character offset of an ast (line, UTF-8 byte column) position: a non-ASCII
    comment earlier on the line would otherwise shift an edit."""
    start = line_starts[lineno - 1]
    line = source[start : line_starts[lineno] if lineno < len(line_starts) else len(source)]
    return start + len(line.encode()[:col_bytes].decode())


def line_starts_of(source: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", source)]


def kernel_tag(kernel: str) -> str:
    name = kernel.strip("_").removesuffix("_kernel").removesuffix("kernel").strip("_")
    return _TAG.sub("_", name).upper() or "KERNEL"


def launches(tree: ast.Module) -> list[tuple[str, ast.Call]]:
    """(kernel name, the launch call) for every `kernel[grid](...)` of a module-level
    function decorated with something ending in `jit` (triton.jit, jit)."""
    jitted = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d).split("(")[0].endswith("jit") for d in node.decorator_list)
    }
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Subscript)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in jitted
        ):
            out.append((node.func.value.id, node))
    return sorted(out, key=lambda kc: (kc[1].lineno, kc[1].col_offset))


def split_shared(source: str, values: dict[str, int], ends: dict[str, int]) -> Split | None:
    """The source with a per-kernel copy of each tunable two or more kernels' launches
    share, or None where none is shared. `values`: tunable -> its literal's value;
    `ends`: tunable -> the character offset where its literal ends (its line is where
    the copies go, after the last of them)."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return None
    starts = line_starts_of(source)
    uses: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for kernel, call in launches(tree):
        for node in ast.walk(call):
            if isinstance(node, ast.Name) and node.id in values and isinstance(node.ctx, ast.Load):
                assert node.end_lineno is not None and node.end_col_offset is not None
                span = (
                    line_offset(source, starts, node.lineno, node.col_offset),
                    line_offset(source, starts, node.end_lineno, node.end_col_offset),
                )
                uses.setdefault(node.id, {}).setdefault(kernel, []).append(span)
    shared = {t: per for t, per in uses.items() if len(per) > 1}
    if not shared:
        return None
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | set(values)
    copies: dict[str, tuple[str, ...]] = {}
    edits: list[tuple[int, int, str]] = []
    for tunable in values:  # the task's order
        if tunable not in shared:
            continue
        names = []
        for kernel, spans in shared[tunable].items():
            name = f"{tunable}_{kernel_tag(kernel)}"
            if name in taken:
                return None  # a name already in use: leave the source alone
            names.append(name)
            edits += [(a, b, name) for a, b in spans]
        copies[tunable] = tuple(names)
    # The copies go on new lines after the line of the last shared tunable's literal.
    last = max(ends[t] for t in copies)
    eol = source.find("\n", last)
    at = len(source) if eol < 0 else eol + 1
    newline = "\r\n" if "\r\n" in source else "\n"
    block = "".join(
        f"{name} = {values[t]}  # {t} for one kernel (tuner: per-kernel launch parameters)"
        + newline
        for t, names in copies.items()
        for name in names
    )
    out = source
    for a, b, text in sorted([*edits, (at, at, block)], key=lambda e: -e[0]):
        out = out[:a] + text + out[b:]
    tunables = tuple(
        n for t in values for n in (copies[t] if t in copies else (t,))
    )  # each shared tunable replaced by its copies, in place
    return Split(out, copies, tunables)


def per_kernel_names(source: str, tunables: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The tunables to tune in `source`: each task tunable, or in its place the per-kernel
    copies an earlier split made of it (found by the comment the split writes)."""
    out: list[str] = []
    for t in tunables:
        found = re.findall(
            rf"^({re.escape(t)}_[A-Z0-9_]+) = -?\d+  # {re.escape(t)} for one kernel", source, re.M
        )
        out += found or [t]
    return tuple(out)
