"""Normalized source, fingerprints and the normalized change between two sources.

Two spellings of the same kernel should normalize to the same text: comments,
docstrings, formatting and the names the author chose are removed; attribute names
(`tl.load`, `tl.constexpr`), keyword names of library calls (`num_warps=`, `mask=`) and
every literal (block sizes!) are kept, because those carry the meaning.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import io
import tokenize

from kernelloop import pyast


def _drop_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            return body[1:] or [ast.Pass()]
    return body


def _stored_names(fn: ast.AST) -> list[str]:
    """Names a function binds (arguments first, then assignments), in source order."""
    names: list[str] = []
    if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        a = fn.args
        for arg in [*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg]:
            if arg is not None:
                names.append(arg.arg)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
    return list(dict.fromkeys(names))


def _module_names(tree: ast.Module) -> list[str]:
    """Names the module defines. Imports are left alone: `tl`, `torch` carry meaning."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
    return list(dict.fromkeys(names))


class _Renamer(ast.NodeTransformer):
    """Renames module names to g<i> and function-local names to l<i> (per function)."""

    def __init__(self, tree: ast.Module, erase: bool) -> None:
        self.erase = erase
        self.globals = {n: f"g{i}" for i, n in enumerate(_module_names(tree))}
        self.params = {
            a.arg
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for a in [*fn.args.args, *fn.args.kwonlyargs, *fn.args.posonlyargs]
        }
        self.scopes: list[dict[str, str]] = []

    def _name(self, name: str) -> str:
        for scope in reversed(self.scopes):
            if name in scope:
                return "_" if self.erase else scope[name]
        if name in self.globals:
            return "_" if self.erase else self.globals[name]
        return name  # builtins and anything not bound here keep their meaning

    def visit_Module(self, node: ast.Module) -> ast.AST:
        node.body = _drop_docstring(node.body)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._name(node.name)
        node.body = _drop_docstring(node.body)
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        self.scopes.append({n: f"l{i}" for i, n in enumerate(_stored_names(node))})
        node.args = self.visit(node.args)
        node.returns = self.visit(node.returns) if node.returns else None
        node.body = [self.visit(s) for s in node.body]
        self.scopes.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._name(node.name)
        node.body = _drop_docstring(node.body)
        self.generic_visit(node)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._name(node.arg)
        if node.annotation is not None:
            node.annotation = self.visit(node.annotation)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._name(node.id)
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        # `BLOCK=BLOCK` into our own kernel follows the renaming; `num_warps=4` into a
        # library call keeps its name.
        if node.arg in self.params:
            node.arg = "_" if self.erase else "k"
        node.value = self.visit(node.value)
        return node


def _fallback_normalize(source: str) -> str:
    """For sources that do not parse: drop comments and layout, keep tokens."""
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    out: list[str] = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(source).readline):
            if t.type not in skip:
                out.append("\n" if t.type == tokenize.NEWLINE else t.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # e.g. an unclosed bracket at EOF: the tokens read so far are what we have
    return "\n".join(" ".join(line.split()) for line in " ".join(out).split("\n") if line.strip())


def normalize_source(source: str, *, erase_names: bool = False) -> str:
    """Canonical text of a source: one statement per line, no comments, names normalized."""
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return _fallback_normalize(source)
    tree = _Renamer(tree, erase_names).visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree))


def fingerprint(source: str) -> str:
    """Hash of the normalized source: equal for renamed/reformatted/re-commented copies."""
    return hashlib.sha256(normalize_source(source).encode()).hexdigest()[:20]


def changed_lines(parent: str, child: str) -> list[str]:
    """The normalized change from parent to child: removed lines as '-…', added as '+…'.

    Names are erased (not numbered) so that one new variable does not renumber, and so
    "change", every later line of its function.
    """
    a = [ln.strip() for ln in normalize_source(parent, erase_names=True).splitlines()]
    b = [ln.strip() for ln in normalize_source(child, erase_names=True).splitlines()]
    out = []
    for line in difflib.unified_diff(a, b, n=0, lineterm=""):
        if line.startswith(("---", "+++", "@@")):
            continue
        if line[1:].strip():
            out.append(line)
    return out
