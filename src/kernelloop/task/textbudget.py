"""Token estimates and section budgets for text an agent reads (the task contract, the
prompt's sections, the history digest).

No tokenizer is loaded: the estimate is the larger of two rules of thumb, ~4 characters a
token (BPE on English and code) and one token per word or punctuation mark (numbers like
'1.38x' split into several tokens). Both over-count rather than under-count for the
models kernelloop talks to, so a section within its budget is within it for them too.
A section over its budget is cut at a line boundary and the cut is marked.
"""

from __future__ import annotations

import math
import re


def tokens_by_chars(text: str) -> int:
    """The usual rule of thumb for BPE tokenizers on English and code: ~4 chars a token."""
    return math.ceil(len(text) / 4)


def tokens_by_words(text: str) -> int:
    """Words and punctuation marks counted separately: a pessimistic count for numbers
    like '1.38x' or '-4.2%', which BPE tokenizers split into several tokens."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def approx_tokens(text: str) -> int:
    return max(tokens_by_chars(text), tokens_by_words(text))


def cut_marker(what: str, dropped_lines: int, budget_tokens: int) -> str:
    return (
        f"[… {what} cut here: {dropped_lines} more line(s) over this section's budget of "
        f"{budget_tokens} tokens]"
    )


def fit(text: str, budget_tokens: int, what: str = "text") -> str:
    """`text` whole when its estimate is within `budget_tokens`, else its first lines and a
    marked cut (the marker counted inside the budget). Never cuts inside a line unless the
    first line alone is over the budget, and then at a word."""
    if approx_tokens(text) <= budget_tokens:
        return text
    lines = text.split("\n")
    marker_room = approx_tokens(cut_marker(what, len(lines), budget_tokens)) + 1
    room = max(budget_tokens - marker_room, 0)
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = approx_tokens(line) + 1
        if used + cost > room:
            break
        kept.append(line)
        used += cost
    if not kept and lines and room > 0:
        # One line over the budget on its own: keep its start, cut at a word.
        kept.append(clip(lines[0], room * 2))
    dropped = len(lines) - len(kept)
    return "\n".join([*kept, cut_marker(what, max(dropped, 1), budget_tokens)])


def clip(text: str, n: int) -> str:
    """`text` on one line within n characters, cut at a word boundary and marked with …
    (a word longer than the whole room is cut inside it)."""
    text = " ".join(text.split())
    if len(text) <= n:
        return text
    head = text[: n - 1]
    cut = head.rsplit(" ", 1)[0] if " " in head else head
    return cut.rstrip(" ,;:") + "…"
