"""A one-line, human-readable summary of what a candidate changed against its parent."""

from __future__ import annotations

import ast
import difflib

from kernelloop import pyast


def _constants(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out[target.id] = ast.unparse(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            out[node.target.id] = ast.unparse(node.value)
    return out


def _functions(tree: ast.Module) -> list[tuple[str, int, int]]:
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.append((node.name, start, node.end_lineno or node.lineno))
    return spans


def _enclosing(spans: list[tuple[str, int, int]], line: int) -> str | None:
    inside = [(end - start, name) for name, start, end in spans if start <= line <= end]
    return min(inside)[1] if inside else None


def _parse(source: str) -> ast.Module | None:
    try:
        return pyast.parse(source)
    except (SyntaxError, ValueError):
        return None


def summarize_diff(parent: str, child: str) -> str:
    """E.g. "+12/-4 lines in _fused_fwd, forward; BLOCK_COLS 1024→2048"."""
    a, b = parent.splitlines(), child.splitlines()
    added = removed = 0
    touched_a: list[int] = []
    touched_b: list[int] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        removed += i2 - i1
        added += j2 - j1
        touched_a += range(i1 + 1, i2 + 1)
        touched_b += range(j1 + 1, j2 + 1)
    if not added and not removed:
        return "no change"
    parts = [f"+{added}/-{removed} lines"]
    ta, tb = _parse(parent), _parse(child)
    if ta is not None and tb is not None:
        names: list[str] = []
        for tree, lines in ((tb, touched_b), (ta, touched_a)):
            spans = _functions(tree)
            names += [n for n in (_enclosing(spans, ln) for ln in lines) if n]
        names = list(dict.fromkeys(names))
        if names:
            more = f" +{len(names) - 4} more" if len(names) > 4 else ""
            parts[0] += " in " + ", ".join(names[:4]) + more
        ca, cb = _constants(ta), _constants(tb)
        consts = [f"{k} {ca[k]}→{cb[k]}" for k in cb if k in ca and ca[k] != cb[k]]
        consts += [f"+{k}={cb[k]}" for k in cb if k not in ca]
        consts += [f"-{k}" for k in ca if k not in cb]
        if consts:
            parts.append(", ".join(c if len(c) < 40 else c[:39] + "…" for c in consts[:5]))
    return "; ".join(parts)
