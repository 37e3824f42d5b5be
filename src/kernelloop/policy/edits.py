"""Edit points: how much of the parent a proposal touched, counted from the diff.

An edit point is a contiguous changed hunk of a zero-context line diff between the
parent and the candidate, with hunks separated by at most `merge_gap` unchanged lines
merged into one (a change to a loop header and its body three lines down is one idea).

Lines that cannot change what runs are left out before diffing, so an agent is not
charged for them: blank lines, comments, docstrings, and whitespace inside a line
(the diff compares token sequences). Indentation is kept, because in Python it is
semantics. String literals that are not docstrings are compared line by line, so a
CUDA C++ kernel held in a triple-quoted string is counted like any other code.
"""

from __future__ import annotations

import ast
import difflib
import io
import tokenize
from dataclasses import dataclass

from kernelloop import pyast

DEFAULT_MERGE_GAP = 3

_SKIPPED_TOKENS = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


@dataclass(frozen=True)
class EditPoint:
    """One merged hunk, as 1-based inclusive line ranges in each file (empty = pure
    insert/delete)."""

    parent_lines: tuple[int, int] | None
    candidate_lines: tuple[int, int] | None

    def describe(self) -> str:
        lines = self.candidate_lines or self.parent_lines
        assert lines is not None
        where = (
            f"line {lines[0]}"
            if lines[0] == lines[1]
            else f"lines {lines[0]}-{lines[1]}, {lines[1] - lines[0] + 1} lines"
        )
        side = "candidate" if self.candidate_lines else "parent (deleted)"
        return f"{side} {where}"


def edit_points(parent: str, candidate: str, merge_gap: int = DEFAULT_MERGE_GAP) -> list[EditPoint]:
    """The edit points of `candidate` relative to `parent`, in file order."""
    p_lines, p_keys = _unzip(_code_lines(parent))
    c_lines, c_keys = _unzip(_code_lines(candidate))
    # autojunk=False: with autojunk a common line (e.g. `mask = cols < n_cols`) in a
    # 200+ line file becomes "junk" and the matcher then reports spurious hunks.
    matcher = difflib.SequenceMatcher(a=p_keys, b=c_keys, autojunk=False)
    hunks: list[
        tuple[int, int, int, int]
    ] = []  # [i1, i2) in parent keys, [j1, j2) in candidate keys
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if hunks and i1 - hunks[-1][1] <= merge_gap:
            hunks[-1] = (hunks[-1][0], i2, hunks[-1][2], j2)
        else:
            hunks.append((i1, i2, j1, j2))
    return [EditPoint(_span(p_lines, i1, i2), _span(c_lines, j1, j2)) for i1, i2, j1, j2 in hunks]


def _unzip(pairs: list[tuple[int, str]]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    return tuple(n for n, _ in pairs), tuple(k for _, k in pairs)


def _span(line_numbers: tuple[int, ...], start: int, stop: int) -> tuple[int, int] | None:
    return (line_numbers[start], line_numbers[stop - 1]) if stop > start else None


def _code_lines(source: str) -> list[tuple[int, str]]:
    """(physical line number, normalized content) for each line that carries code."""
    try:
        return _token_lines(source)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # An unparsable file still gets counted, just without the normalization.
        return [(n, line.rstrip()) for n, line in enumerate(source.splitlines(), 1) if line.strip()]


def _token_lines(source: str) -> list[tuple[int, str]]:
    docstrings = _docstring_spans(source)
    parts: dict[int, list[str]] = {}
    indent: dict[int, int] = {}
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        if tok.type in _SKIPPED_TOKENS:
            continue
        if tok.type == tokenize.STRING and any(
            first <= tok.start[0] and tok.end[0] <= last for first, last in docstrings
        ):
            continue
        # A token spanning lines (a triple-quoted string) contributes one piece per line,
        # so editing one line of an embedded CUDA kernel is one changed line, not many.
        for offset, piece in enumerate(tok.string.split("\n")):
            line = tok.start[0] + offset
            indent.setdefault(line, depth)
            parts.setdefault(line, []).append(piece.strip() if offset else piece)
    return [
        (line, f"{indent[line]}|" + " ".join(p for p in parts[line] if p))
        for line in sorted(parts)
        if any(parts[line])
    ]


def _docstring_spans(source: str) -> list[tuple[int, int]]:
    """First and last line of every module, class and function docstring.

    Lines, not columns: ast columns count UTF-8 bytes and tokenize columns count
    characters, and a docstring shares its lines with no other string in real code.
    """
    tree = pyast.parse(source)
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            doc = body[0].value
            spans.append((doc.lineno, doc.end_lineno or doc.lineno))
    return spans
