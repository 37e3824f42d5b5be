"""Python source to AST, safe from many threads at once.

CPython 3.11 keeps the AST constructor's recursion depth in one counter per
interpreter (gh-106905): two threads turning source into `ast` objects at the
same moment can corrupt it, and `ast.parse` then raises
``SystemError: AST constructor recursion depth mismatch`` on perfectly good
source. kernelloop parses from several threads (an executor's slots each
screen a candidate; the loop overlaps a proposal with an evaluation), so every
parse in the package goes through this one lock. `tests/test_pyast.py` holds
that no module calls `ast.parse` or `ast.literal_eval` on text directly.
"""

from __future__ import annotations

import ast
import threading
from types import CodeType
from typing import Any

# Re-entrant: a finalizer run by the collector inside one parse may parse again.
_LOCK = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """`ast.parse(source, filename, mode)` under the process-wide AST lock."""
    with _LOCK:
        return ast.parse(source, filename, mode)


def literal_eval(node_or_text: str | ast.AST) -> Any:
    """`ast.literal_eval`, parsing text under the lock first."""
    if isinstance(node_or_text, str):
        node_or_text = parse(node_or_text.lstrip(" \t"), mode="eval")
    return ast.literal_eval(node_or_text)


def compile_tree(tree: ast.AST, filename: str, mode: str = "exec") -> CodeType:
    """`compile(tree, ...)` of an edited AST: the tree-to-C conversion shares the same counter."""
    with _LOCK:
        return compile(tree, filename, mode, dont_inherit=True)
