"""Where a tunable's integer literal sits in a kernel's source, and rewriting it: every
tuner edit changes module-level literals and leaves every other byte as it was."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kernelloop import pyast
from kernelloop.agents.tuner_kernels import line_offset


@dataclass(frozen=True)
class TunableLiteral:
    """Where a tunable's integer literal sits in the source (character offsets)."""

    name: str
    value: int
    start: int
    end: int


def find_tunables(source: str, names: list[str] | tuple[str, ...]) -> dict[str, TunableLiteral]:
    """Module-level `NAME = <int>` (or `NAME: int = <int>`) for each requested name.

    A name assigned more than once takes its last assignment, as Python does; names
    without an integer literal are left out (the tuner cannot move them).
    """
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return {}
    line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", source)]
    found: dict[str, TunableLiteral] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not (isinstance(target, ast.Name) and target.id in names):
            continue
        if not (isinstance(value, ast.Constant) and type(value.value) is int):
            found.pop(target.id, None)
            continue
        assert value.end_lineno is not None and value.end_col_offset is not None
        start = _offset(source, line_starts, value.lineno, value.col_offset)
        end = _offset(source, line_starts, value.end_lineno, value.end_col_offset)
        found[target.id] = TunableLiteral(target.id, value.value, start, end)
    return {n: found[n] for n in names if n in found}  # the task's order, not the file's


_offset = line_offset  # ast columns count UTF-8 bytes (tuner_kernels.line_offset)


def rewrite(source: str, lit: TunableLiteral, new: int) -> str:
    return source[: lit.start] + str(new) + source[lit.end :]
