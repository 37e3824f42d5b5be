"""Turn a model's answer into candidates: fields (hypothesis, predicted effect, direction,
difficulty) and a full source file, given directly or as a unified diff.

The parser is liberal in layout (`Hypothesis:` lines or `## Hypothesis` headings, bold
labels, one or several `### Candidate N` sections) and strict in substance: code must
parse as Python, define the entry function and differ from the best. Every problem
becomes a sentence that is quoted back to the model in the one retry it gets.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kernelloop import pyast
from kernelloop.agents.llm.patch import PatchError, apply_diff, looks_like_diff
from kernelloop.errors import KernelloopError
from kernelloop.task.native_source import is_cuda_text, module_for

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+.-]*)")
# "### Candidate 2", "## Proposal", "### Direction 3: ..." (a bare "## Direction" heading is
# a field label, not a section).
_SECTION = re.compile(
    r"^\s*#{1,4}\s*\**\s*(candidate\b|proposal\b|direction\s*#?\d).*$", re.IGNORECASE
)
_LABELS = {
    "hypothesis": "hypothesis",
    "predicted effect": "predicted_effect",
    "predicted_effect": "predicted_effect",
    "prediction": "predicted_effect",
    "expected effect": "predicted_effect",
    "direction": "direction",
    "difficulty": "difficulty",
    "parent": "parent",
}
_LABEL_ALT = "|".join(sorted((re.escape(k) for k in _LABELS), key=len, reverse=True))
# "Hypothesis: text", "- **Hypothesis**: text", "**Hypothesis:** text"
_LABEL_LINE = re.compile(
    rf"^\s*(?:[-*>]\s+)?\**\s*({_LABEL_ALT})\s*\**\s*[:：]\s*\**\s*(.*)$", re.I
)
# "## Hypothesis" with the value in the following paragraph
_LABEL_HEADING = re.compile(rf"^\s*#{{1,6}}\s*\**\s*({_LABEL_ALT})\s*\**\s*:?\s*$", re.I)
_DIFF_LANGS = {"diff", "patch", "udiff"}
_CODE_LANGS = {"", "python", "py", "python3", "triton"}
_CPP_LANGS = {"cuda", "cu", "cpp", "c++", "cxx", "cc"}


@dataclass(frozen=True)
class ParsedCandidate:
    hypothesis: str
    predicted_effect: str = ""
    direction: str = ""
    difficulty: int | None = None
    source: str | None = None  # None: a direction without a draft (screen answers only)
    from_diff: bool = False
    parent: str = ""  # the proposal id named on a `Parent: #N` line ("" = the current best)
    # Set on a section that cannot be judged: why, in one sentence for the model (the
    # source is then the section's full file where it has one, for the history row).
    problem: str = ""


@dataclass(frozen=True)
class _Block:
    lang: str
    body: str


def _split_sections(text: str) -> list[list[str]]:
    """Split at `### Candidate N` headings that are outside code fences."""
    sections: list[list[str]] = [[]]
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None and _SECTION.match(line):
            sections.append([line])
            continue
        if m and (fence is None or m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)):
            fence = m.group(1) if fence is None else None
        sections[-1].append(line)
    body = [s for s in sections[1:] if s]
    return body if body else [sections[0]]


def _blocks_and_prose(lines: list[str]) -> tuple[list[_Block], list[str], bool]:
    """Code blocks, the prose lines outside them, and whether a fence was left open."""
    blocks: list[_Block] = []
    prose: list[str] = []
    fence: str | None = None
    lang = ""
    body: list[str] = []
    for line in lines:
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence, lang, body = m.group(1), m.group(2).lower(), []
                prose.append("")  # a code block ends a label's paragraph
            else:
                prose.append(line)
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2):
            blocks.append(_Block(lang, "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    return blocks, prose, fence is not None


def _fields(prose: list[str]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    key: str | None = None
    for line in prose:
        m = _LABEL_LINE.match(line) or _LABEL_HEADING.match(line)
        if m:
            key = _LABELS[m.group(1).lower()]
            first = m.group(2).strip().strip("*").strip() if m.lastindex == 2 else ""
            found.setdefault(key, [])
            if first:
                found[key].append(first)
        elif key is not None and line.strip() and not line.lstrip().startswith("#"):
            found[key].append(line.strip())
        elif key is not None and not line.strip() and found.get(key):
            key = None  # a blank line after some text ends the field
    return {k: " ".join(v).strip() for k, v in found.items()}


def _difficulty(text: str) -> int | None:
    m = re.search(r"\d+", text or "")
    return None if m is None else max(1, min(5, int(m.group())))


def _defines(tree: ast.Module, entry: str) -> bool:
    return any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == entry for n in tree.body
    )


def check_source(source: str, base_source: str, entry: str) -> str:
    """Return the problem with a candidate source as a sentence, or '' if there is none."""
    try:
        tree = pyast.parse(source)
    except SyntaxError as e:
        return f"the candidate is not valid Python (line {e.lineno}: {e.msg})"
    if not _defines(tree, entry):
        return f"the candidate does not define the entry function `def {entry}(...)` at top level"
    if source.strip() == base_source.strip():
        return "the candidate is identical to the current best source"
    return ""


def _native_source(
    blocks: list[_Block], base: str, entry: str, native: tuple[str, tuple[str, ...]]
) -> tuple[str | None, str]:
    """(module, problem) from the last C++/CUDA block that binds its functions: the module
    that stands for it (task/native_source.py), checked like a Python answer."""
    cpp = [b for b in blocks if b.lang in _CPP_LANGS]
    for b in reversed(cpp):
        if "PYBIND11_MODULE" not in b.body:
            continue
        try:
            source = module_for(entry, *native, b.body, "answer.cu", is_cuda_text(b.body))
        except KernelloopError as e:
            return None, str(e)
        problem = check_source(source, base, entry)
        return (None, problem) if problem else (source, "")
    if cpp:
        return None, (
            f"the C++ block does not bind its functions: add `PYBIND11_MODULE("
            f'TORCH_EXTENSION_NAME, m) {{ m.def("{entry}", &{entry}); }}`'
        )
    return None, ""


def _source_from(
    blocks: list[_Block], base: str, entry: str, native: tuple[str, tuple[str, ...]] | None = None
) -> tuple[str | None, bool, str]:
    """(source, from_diff, problem); a full file wins over a diff when both are given; with
    `native` (a cuda task's entry parameters), a C++ source in a ```cuda block is a full
    file too."""
    problems: list[str] = []
    if native is not None:
        source, problem = _native_source(blocks, base, entry, native)
        if source is not None:
            return source, False, ""
        if problem:
            problems.append(problem)
    code = [b for b in blocks if b.lang in _CODE_LANGS and not looks_like_diff(b.body)]
    # Prefer blocks that look like the whole file; otherwise judge the longest one, so the
    # model hears the precise problem ("does not define forward") rather than a vague one.
    full = [b for b in code if f"def {entry}" in b.body] or sorted(code, key=lambda b: len(b.body))[
        -1:
    ]
    for b in reversed(full):  # the last full file: models show snippets before the answer
        problem = check_source(b.body, base, entry)
        if not problem:
            return b.body, False, ""
        problems.append(problem)
    for b in blocks:
        if b.lang in _DIFF_LANGS or looks_like_diff(b.body):
            try:
                source = apply_diff(base, b.body)
            except PatchError as e:
                problems.append(f"the diff cannot be applied: {e}")
                continue
            problem = check_source(source, base, entry)
            if not problem:
                return source, True, ""
            problems.append(f"after applying the diff, {problem}")
    if problems:
        return None, False, problems[0]
    return None, False, ""


def parse_answer(
    text: str,
    base_source: str,
    entry: str,
    *,
    require_source: bool = True,
    truncated: bool = False,
    native: tuple[str, tuple[str, ...]] | None = None,
    parents: Mapping[str, str] | None = None,
) -> tuple[list[ParsedCandidate], list[str]]:
    """All usable candidates in the answer, and one sentence per unusable section.
    `native`: a cuda task's entry parameters (as written, and their names), with which a
    C++ source in a ```cuda block stands for a candidate. `parents`: the earlier correct
    candidates a `Parent: #N` line may name (id -> source); a diff then applies to it."""
    usable, _, errors = parse_sections(
        text,
        base_source,
        entry,
        require_source=require_source,
        truncated=truncated,
        native=native,
        parents=parents,
    )
    return usable, errors


def parse_sections(
    text: str,
    base_source: str,
    entry: str,
    *,
    require_source: bool = True,
    truncated: bool = False,
    native: tuple[str, tuple[str, ...]] | None = None,
    parents: Mapping[str, str] | None = None,
) -> tuple[list[ParsedCandidate], list[ParsedCandidate], list[str]]:
    """(usable candidates, unusable sections, one sentence per problem): as
    `parse_answer`, and each section that cannot be judged as a `ParsedCandidate` whose
    `problem` says why, so the loop can record and refuse it rather than drop it."""
    parents = parents or {}
    candidates: list[ParsedCandidate] = []
    unusable: list[ParsedCandidate] = []
    errors: list[str] = []
    sections = _split_sections(text or "")
    for n, lines in enumerate(sections, start=1):
        where = f"candidate {n}: " if len(sections) > 1 else ""
        blocks, prose, open_fence = _blocks_and_prose(lines)
        fields = _fields(prose)
        cand, problem = _read_section(
            blocks,
            fields,
            open_fence,
            base_source,
            entry,
            require_source,
            truncated,
            native,
            parents,
        )
        if problem:
            errors.append(f"{where}{problem}")
        if cand is None:
            hypothesis, direction = fields.get("hypothesis", ""), fields.get("direction", "")
            unusable.append(
                ParsedCandidate(
                    hypothesis=hypothesis or direction,
                    predicted_effect=fields.get("predicted_effect", ""),
                    direction=direction or _first_sentence(hypothesis),
                    source=_full_file(blocks, entry),
                    parent=fields.get("parent", "").strip().strip("*`#").strip(),
                    problem=f"{where}{problem}",
                )
            )
        else:
            candidates.append(cand)
    return candidates, unusable, errors


def _read_section(
    blocks: list[_Block],
    fields: dict[str, str],
    open_fence: bool,
    base_source: str,
    entry: str,
    require_source: bool,
    truncated: bool,
    native: tuple[str, tuple[str, ...]] | None,
    parents: Mapping[str, str],
) -> tuple[ParsedCandidate | None, str]:
    """(the section's candidate, "") or (None, why it cannot be judged); a screen
    draft that is broken keeps its direction: (candidate, the draft's problem)."""
    if open_fence:
        cut = " (the answer was cut off at the token limit; answer more briefly)"
        return None, f"a code block is never closed{cut if truncated else ''}"
    hypothesis = fields.get("hypothesis", "")
    direction = fields.get("direction", "")
    if not hypothesis and not (direction and not require_source):
        return None, "there is no 'Hypothesis:' line saying why it should be faster"
    parent, problem = _parent(fields.get("parent", ""), parents)
    if problem:
        return None, problem
    base = parents[parent] if parent else base_source
    source, from_diff, problem = _source_from(blocks, base, entry, native)
    if problem and require_source:
        return None, problem
    if source is None and require_source:
        return None, (
            "there is no code: put the complete new source in a ```python block "
            "or a unified diff against the current best in a ```diff block"
        )
    cand = ParsedCandidate(
        hypothesis=hypothesis or direction,
        predicted_effect=fields.get("predicted_effect", ""),
        direction=direction or _first_sentence(hypothesis),
        difficulty=_difficulty(fields.get("difficulty", "")),
        source=source,
        from_diff=from_diff,
        parent=parent,
    )
    # a screen draft that is broken: keep the direction, drop the draft
    return cand, f"{problem} (kept the direction without the draft)" if problem else ""


def _full_file(blocks: list[_Block], entry: str) -> str | None:
    """The section's last complete Python file (defines the entry), if it has one."""
    for b in reversed(blocks):
        if b.lang in _CODE_LANGS and not looks_like_diff(b.body) and f"def {entry}" in b.body:
            return b.body
    return None


def _parent(text: str, parents: Mapping[str, str]) -> tuple[str, str]:
    """(the proposal id a `Parent:` line names, "") or ("", why it cannot be used); a
    blank line, "best" or "current best" is the current best."""
    text = text.strip().strip("*`").strip()
    if not text or text.lower() in ("best", "current best", "the current best", "none"):
        return "", ""
    m = re.fullmatch(r"#?\s*(\d+)(?:\s.*)?", text)
    if m is None:
        return (
            "",
            f"the Parent line {text!r} names no proposal: write `Parent: #ID` or leave it out",
        )
    if m.group(1) not in parents:
        known = ", ".join(f"#{k}" for k in parents) or "none yet"
        return "", (
            f"Parent #{m.group(1)} is not an earlier candidate judged correct; choose one of "
            f"{known}, or leave the line out to start from the current best"
        )
    return m.group(1), ""


def _first_sentence(text: str, limit: int = 120) -> str:
    head = re.split(r"(?<=[.;])\s", text.strip(), maxsplit=1)[0]
    return head[:limit]
