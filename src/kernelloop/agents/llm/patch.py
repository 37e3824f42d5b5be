"""Apply a model's unified diff to the best source, strictly.

Models write diffs with wrong line numbers and wrong hunk counts, so both are treated
as hints: each hunk's old lines (context and removals) are searched for near the line
the header names, and the nearest exact match wins. What is not tolerated is context
that does not exist in the file: applying that would be guessing, so the hunk is refused
with an error the model can act on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HUNK = re.compile(r"^@@+\s*-(\d+)(?:,\d+)?\s+\+\d+(?:,\d+)?\s*@@+")
_BARE_HUNK = re.compile(r"^@@+.*$")


class PatchError(ValueError):
    """The diff cannot be applied exactly; the message says which hunk and why."""


@dataclass
class Hunk:
    header: str
    old_start: int | None  # 1-based, as written by the model; None if the header had no numbers
    old: list[str]
    new: list[str]


def looks_like_diff(text: str) -> bool:
    return any(_BARE_HUNK.match(line) for line in text.splitlines())


def parse_hunks(diff: str) -> list[Hunk]:
    hunks: list[Hunk] = []
    current: Hunk | None = None
    lines = diff.splitlines()
    while lines and not lines[-1].strip():  # the blank line before a closing fence
        lines.pop()
    for n, line in enumerate(lines, start=1):
        nxt = lines[n] if n < len(lines) else ""
        # "--- a/f" followed by "+++ b/f" is a file header even between hunks; a lone
        # "--- x" inside a hunk is the removal of a line that starts with "-- ".
        file_header = (line.startswith("--- ") and nxt.startswith("+++ ")) or line.startswith(
            ("diff --git ", "index ")
        )
        if _BARE_HUNK.match(line):
            m = _HUNK.match(line)
            current = Hunk(line.strip(), int(m.group(1)) if m else None, [], [])
            hunks.append(current)
        elif file_header or current is None:
            current = None  # text outside hunks (headers, prose) is skipped
        elif line.startswith("\\"):  # "\ No newline at end of file"
            continue
        elif line == "" or line.startswith(" "):
            # An empty line is a blank context line whose leading space was stripped,
            # which editors and models both do.
            current.old.append(line[1:])
            current.new.append(line[1:])
        elif line.startswith("-"):
            current.old.append(line[1:])
        elif line.startswith("+"):
            current.new.append(line[1:])
        else:
            raise PatchError(
                f"diff line {n} ({line[:60]!r}) starts with neither ' ', '-' nor '+'; "
                "prefix context lines with a space"
            )
    if not hunks:
        raise PatchError("the diff has no '@@ -a,b +c,d @@' hunk header")
    for i, h in enumerate(hunks, start=1):
        if h.old == h.new:
            raise PatchError(f"hunk {i} ({h.header}) changes nothing")
    return hunks


def _find(lines: list[str], old: list[str], start: int, expected: int, loose: bool) -> int | None:
    """Index where `old` occurs at or after `start`, nearest to `expected`; None if absent."""
    norm = (lambda s: s.rstrip()) if loose else (lambda s: s)
    want = [norm(s) for s in old]
    best: int | None = None
    for p in range(start, len(lines) - len(old) + 1):
        if [norm(s) for s in lines[p : p + len(old)]] == want:
            if best is None or abs(p - expected) < abs(best - expected):
                best = p
    return best


def apply_diff(base: str, diff: str) -> str:
    """Return `base` with every hunk of `diff` applied, or raise PatchError."""
    lines = base.splitlines()
    out: list[str] = []
    cursor = 0  # hunks apply in order: no hunk may reach back before the previous one
    shift = 0  # how far the model's line numbers have been off so far
    for i, h in enumerate(parse_hunks(diff), start=1):
        expected = cursor if h.old_start is None else max(cursor, h.old_start - 1 + shift)
        if not h.old:  # pure insertion without context: trust the line number
            pos: int | None = min(expected, len(lines))
        else:
            pos = _find(lines, h.old, cursor, expected, loose=False)
            if pos is None:  # trailing whitespace is the one difference we forgive
                pos = _find(lines, h.old, cursor, expected, loose=True)
        if pos is None:
            first_missing = next(
                (s for s in h.old if s.strip() and s.rstrip() not in {x.rstrip() for x in lines}),
                h.old[0],
            )
            raise PatchError(
                f"hunk {i} ({h.header}) does not match the current best source; for example "
                f"the line {first_missing.strip()[:80]!r} is not where the hunk says. "
                "Copy context lines exactly, or send the full source instead"
            )
        if h.old_start is not None:
            shift = pos - (h.old_start - 1)
        out.extend(lines[cursor:pos])
        out.extend(h.new)
        cursor = pos + len(h.old)
    out.extend(lines[cursor:])
    text = "\n".join(out)
    return text + "\n" if base.endswith("\n") or not base else text
