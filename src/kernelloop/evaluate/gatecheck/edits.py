"""Precise source edits found with `ast`: a mutant or an equivalent is the original text
with a few spans replaced, so its diff shows exactly what changed and nothing else."""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

from kernelloop import pyast


@dataclass(frozen=True)
class Variant:
    """One rewrite of a kernel's source: a mutant (the gate must reject it) or an
    equivalent (the gate must accept it)."""

    operator: str
    line: int  # 1-based line of the (first) edit in the original
    description: str
    source: str
    diff: str


class Source:
    """A kernel's text and its parsed tree, with the helpers the operators share."""

    def __init__(self, text: str, name: str = "kernel.py") -> None:
        self.text = text
        self.name = name
        self.tree = pyast.parse(text)
        raw = text.encode()
        self._raw = raw
        # byte offset of each line's start (ast's col_offset counts UTF-8 bytes)
        self._line_starts = [0]
        for i, b in enumerate(raw):
            if b == 0x0A:
                self._line_starts.append(i + 1)
        self.jit_functions = [
            f for f in ast.walk(self.tree) if isinstance(f, ast.FunctionDef) and _is_jit(f)
        ]
        jit_ids = {id(n) for f in self.jit_functions for n in ast.walk(f)}
        self.host_nodes = [n for n in ast.walk(self.tree) if id(n) not in jit_ids]
        self.jit_nodes = [n for f in self.jit_functions for n in ast.walk(f)]

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self._line_starts[node.lineno - 1] + node.col_offset
        end = self._line_starts[node.end_lineno - 1] + node.end_col_offset
        return start, end

    def seg(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self._raw[start:end].decode()

    def edit(
        self,
        operator: str,
        node: ast.AST,
        replacement: str,
        description: str,
        extra: list[tuple[ast.AST, str]] | None = None,
    ) -> Variant:
        """`node`'s text replaced by `replacement` (and each of `extra`'s nodes by its text)."""
        return self.edit_spans(
            operator,
            node.lineno,
            [(*self.span(node), replacement), *((*self.span(n), t) for n, t in extra or [])],
            description,
        )

    def edit_spans(
        self, operator: str, line: int, spans: list[tuple[int, int, str]], description: str
    ) -> Variant:
        raw = self._raw
        for start, end, text in sorted(spans, reverse=True):
            raw = raw[:start] + text.encode() + raw[end:]
        return self.variant(operator, line, raw.decode(), description)

    def line_end(self, lineno: int) -> int:
        """Byte offset just past line `lineno`'s text (before its newline)."""
        nxt = self._line_starts[lineno] if lineno < len(self._line_starts) else len(self._raw)
        return nxt - 1 if nxt > 0 and self._raw[nxt - 1 : nxt] == b"\n" else nxt

    def variant(self, operator: str, line: int, text: str, description: str) -> Variant:
        return Variant(operator, line, description, text, diff(self.text, text, self.name))


def diff(before: str, after: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
            n=1,
        )
    )


def _is_jit(f: ast.FunctionDef) -> bool:
    for d in f.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "jit":
            return True
    return False


def is_launch(node: ast.AST) -> bool:
    """`kernel[grid](...)`: a Triton launch."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)


def call_name(node: ast.Call) -> str:
    """`tl.sum` -> "sum", `range` -> "range"."""
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
