"""What `kernelloop mcp` checks in a submitted source before anything is evaluated: that it
can be a candidate at all (it parses and defines the entry), and what the static screen
says of it — the same screen, on the same bytes, as the first stage of its evaluation
(evaluate/trusted/screen/static.py), so a source the evaluation would refuse in milliseconds is
refused before the baseline's round 0 (a minute or more) or any sandbox is started."""

from __future__ import annotations

import ast

from kernelloop import pyast
from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.screen.static import screen_candidate
from kernelloop.policy.static import find_function
from kernelloop.task import Task
from kernelloop.task.native_source import python_source


def unparsable(task: Task, source: str) -> str:
    """Why `source` cannot be a candidate at all — it does not parse (line, column, the
    line's text) or defines no entry function — as a sentence; "" when it can."""
    try:
        text = python_source(task, source)
    except KernelloopError as e:
        return f"the C++ source cannot stand for a candidate ({e})"
    try:
        tree = pyast.parse(text)
    except SyntaxError as e:
        line = (e.text or "").strip()
        return f"the source does not parse: line {e.lineno}, column {e.offset}: {e.msg}" + (
            f" (`{line[:120]}`)" if line else ""
        )
    entry = task.spec.task.entry
    if find_function(tree, entry) is None and not task.model_class():
        return f"the source defines no entry function `def {entry}(...)` at top level"
    return ""


def screen_refusals(task: Task, source: str) -> list[str]:
    """The static screen's findings on the candidate module `source` (a cuda task's C++
    already made a module: `python_source`), as the evaluation words them ("static
    screen: line N: …"); [] when it passes. Parse errors are `unparsable`'s to report."""
    baseline = task.baseline_path.read_bytes()
    findings = screen_candidate(source.encode(), task.spec.task.language, baseline, task.draws())
    return [f"static screen: {f.render()}" for f in findings if f.rule != "syntax"]


def entry_signature(source: str, entry: str) -> str:
    fn = find_function(pyast.parse(source), entry)
    return f"def {entry}({ast.unparse(fn.args)})" if fn is not None else ""
