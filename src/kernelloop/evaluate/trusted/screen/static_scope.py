"""Facts about a candidate's AST that the static screen needs and that are not one node's:
which uses of a builtin's name are really a function's own local, which strings Python
will evaluate as code (annotations), and which strings spell a way into the interpreter.

Kept apart from the rules (static.py) so each stays short; all of it is policy, never a
boundary (docs/evaluate.md, "Static screen").
"""

from __future__ import annotations

import ast
import re
import string
import symtable
from collections import defaultdict
from collections.abc import Callable

_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_COMP_NAMES = {
    ast.ListComp: "listcomp",
    ast.SetComp: "setcomp",
    ast.DictComp: "dictcomp",
    ast.GeneratorExp: "genexpr",
}
_IDENT_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _key(node: ast.AST) -> tuple[str, int]:
    if isinstance(node, ast.Lambda):
        return "lambda", node.lineno
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name, node.lineno
    return _COMP_NAMES[type(node)], node.lineno


def _outer_parts(node: ast.AST) -> list[ast.AST]:
    """Parts of a scope-making node that Python evaluates in the enclosing scope."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        a = node.args
        parts: list[ast.AST] = [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
        if not isinstance(node, ast.Lambda):
            parts += node.decorator_list
            parts += [
                x.annotation
                for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                if x is not None and x.annotation is not None
            ]
            parts += [node.returns] if node.returns is not None else []
        return parts
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
    return [node.generators[0].iter]  # a comprehension's first iterable


def _inner_parts(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return list(node.body)
    if isinstance(node, ast.Lambda):
        return [node.body]
    first, *rest = node.generators
    parts: list[ast.AST] = [first.target, *first.ifs]
    for g in rest:
        parts += [g.target, g.iter, *g.ifs]
    if isinstance(node, ast.DictComp):
        return parts + [node.key, node.value]
    return parts + [node.elt]


def function_locals(source: str, tree: ast.Module, names: set[str]) -> set[int]:
    """ids of the `ast.Name` nodes among `names` that resolve to a function's own local or
    a closure variable, never to the builtin of that name (`def forward(input): ...`).

    Only function scopes count: a module- or class-level binding can be deleted or left
    unbound and the name falls back to the builtin. A node this cannot place in a scope is
    not exempted (the screen then refuses it, which is the safe side)."""
    try:
        top = symtable.symtable(source, "<candidate>", "exec")
    except (SyntaxError, ValueError):
        return set()
    found: set[int] = set()

    def kids(table) -> dict[tuple[str, int], list]:
        out: dict[tuple[str, int], list] = defaultdict(list)
        for ch in table.get_children():
            out[(ch.get_name(), ch.get_lineno())].append(ch)
        return out

    def visit(node: ast.AST, table, children) -> None:
        if isinstance(node, _SCOPES):
            for part in _outer_parts(node):
                visit(part, table, children)
            queue = children.get(_key(node)) if children is not None else None
            inner = queue.pop(0) if queue else None
            inner_children = kids(inner) if inner is not None else None
            for part in _inner_parts(node):
                visit(part, inner, inner_children)
            return
        if (
            isinstance(node, ast.Name)
            and node.id in names
            and table is not None
            and table.get_type() == "function"
        ):
            try:
                sym = table.lookup(node.id)
            except KeyError:
                sym = None
            if sym is not None and not sym.is_global() and (sym.is_local() or sym.is_free()):
                found.add(id(node))
        for child in ast.iter_child_nodes(node):
            visit(child, table, children)

    visit(tree, top, kids(top))
    return found


def string_annotations(tree: ast.AST) -> list[ast.Constant]:
    """String constants inside annotations: `typing.get_type_hints` (and everything built on
    it, such as `functools.singledispatch`'s `register`) evaluates them as code."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
    return [
        n
        for r in roots
        for n in ast.walk(r)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def names_internal(text: str, allowed: set[str]) -> str | None:
    """The interpreter internal a string spells, if it is an attribute path through a dunder
    (`'__globals__'`, `'f.__code__'`): the shape `getattr`, `operator.attrgetter` and
    `functools.update_wrapper(assigned=...)` take. Prose (docstrings) never matches."""
    if len(text) > 200 or not _IDENT_PATH.fullmatch(text):
        return None
    for part in text.split("."):
        if part.startswith("__") and part.endswith("__") and part not in allowed:
            return part
    return None


def format_reach(text: str) -> str | None:
    """The field of a `str.format` template that reads a private or internal attribute
    (`'{0.__globals__}'`): format strings do attribute access by name."""
    if "{" not in text or len(text) > 10_000:
        return None
    try:
        fields = [f for _lit, f, _spec, _conv in string.Formatter().parse(text) if f]
    except ValueError:
        return None
    for field in fields:
        if re.search(r"\.\s*_", field):
            return field
    return None


def module_inits(tree: ast.AST, path: Callable[[ast.AST], str | None]) -> set[int]:
    """The nodes of every `__init__` defined directly in a class deriving from
    torch.nn.Module (`path` resolves a base to its dotted path): where static_rules'
    INIT_FACTORIES may be called. Not into a function, lambda or class defined there: it
    could run later, in forward."""
    inside: set[int] = set()
    nested = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef) or "torch.nn.Module" not in map(path, cls.bases):
            continue
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                todo = list(ast.iter_child_nodes(fn))
                while todo:
                    n = todo.pop()
                    if not isinstance(n, nested):
                        inside.add(id(n))
                        todo.extend(ast.iter_child_nodes(n))
    return inside
