"""What the policy reads from a source without running it: the entry signature and
the kernel launch sites reached from the entry.

Static counting is a cheap early refusal, not the last word: loops, branches and
PyTorch ops in the host code launch kernels this cannot see, so the loop also compares
the measured `kernel_launches_per_call` of the evaluation (see `check_launch_count`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kernelloop import pyast

# `kernel<<<grid, block, ...>>>(` in CUDA C++ held in a Python string.
_CUDA_LAUNCH = re.compile(r"<<<[^;]*?>>>")


@dataclass(frozen=True)
class Signature:
    """An entry function's call interface; annotations and decorators are not part of it."""

    params: tuple[tuple[str, str, str | None], ...]  # (kind, name, default as text)

    def render(self) -> str:
        out: list[str] = []
        star_done = False
        for i, (kind, name, default) in enumerate(self.params):
            if kind == "keyword-only" and not star_done:
                out.append("*")
                star_done = True
            if kind == "var-positional":
                star_done = True
                out.append(f"*{name}")
            elif kind == "var-keyword":
                out.append(f"**{name}")
            else:
                out.append(name if default is None else f"{name}={default}")
            nxt = self.params[i + 1][0] if i + 1 < len(self.params) else None
            if kind == "positional-only" and nxt != "positional-only":
                out.append("/")
        return "(" + ", ".join(out) + ")"


def find_function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The last module-level `def name` (a later definition shadows an earlier one)."""
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node
    return found


def defines_name(tree: ast.Module, name: str) -> bool:
    """Whether the module binds `name` at top level at all (def, class, assignment, import)."""
    for node in tree.body:
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name == name
        ):
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def signature_of(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Signature:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(
        a.defaults
    )
    params: list[tuple[str, str, str | None]] = []
    for i, arg in enumerate(positional):
        kind = "positional-only" if i < len(a.posonlyargs) else "positional-or-keyword"
        params.append((kind, arg.arg, _default_text(defaults[i])))
    if a.vararg:
        params.append(("var-positional", a.vararg.arg, None))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        params.append(("keyword-only", arg.arg, _default_text(default)))
    if a.kwarg:
        params.append(("var-keyword", a.kwarg.arg, None))
    return Signature(tuple(params))


def _default_text(node: ast.expr | None) -> str | None:
    if node is None:
        return None
    try:
        # By value, so `1e-5` and `0.00001` are the same default.
        return repr(pyast.literal_eval(node))
    except (ValueError, SyntaxError, TypeError):
        return ast.unparse(node)


@dataclass(frozen=True)
class LaunchCount:
    """Kernel launch sites reached from the entry, per call, counted statically."""

    triton: int  # `kernel[grid](...)` calls of @triton.jit functions
    extension: int  # calls into a torch.utils.cpp_extension.load_inline module
    cuda: int  # `<<<...>>>` launches in any CUDA C++ string of a module that uses load_inline

    @property
    def total(self) -> int:
        # The `<<<>>>` count says how many kernels the host code launches; which Python
        # wrapper launches them does not matter. Without any (cudaLaunchKernel, a
        # library call), each extension call is taken as one launch.
        return self.triton + (self.cuda if self.cuda else self.extension)

    def describe(self) -> str:
        parts = []
        if self.triton:
            parts.append(f"{self.triton} Triton launch site(s)")
        if self.extension or self.cuda:
            parts.append(
                f"{self.extension} extension call(s) with {self.cuda} CUDA <<<>>> launch(es)"
            )
        return ", ".join(parts) or "no kernel launch sites"


def count_launches(tree: ast.Module, entry: str) -> LaunchCount | None:
    """Launch sites reached from `entry` through calls to module-level functions.

    A helper called twice counts twice; a launch in a loop counts once (static). None
    when the module has no `def entry`.
    """
    functions = {
        n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    if entry not in functions:
        return None
    kernels = {name for name, fn in functions.items() if _is_triton_kernel(fn)}
    ext_names, ext_getters = _extension_handles(tree, functions)
    memo: dict[str, tuple[int, int]] = {}

    def visit(name: str, active: frozenset[str]) -> tuple[int, int]:
        if name in memo:
            return memo[name]
        triton = ext = 0
        for node in ast.walk(functions[name]):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if (
                isinstance(f, ast.Subscript)
                and isinstance(f.value, ast.Name)
                and f.value.id in kernels
            ):
                triton += 1
            elif isinstance(f, ast.Attribute) and _is_extension(f.value, ext_names, ext_getters):
                ext += 1
            elif (
                isinstance(f, ast.Name)
                and f.id in functions
                and f.id not in kernels
                and f.id not in active
                and f.id not in ext_getters
            ):
                t, e = visit(f.id, active | {f.id})
                triton, ext = triton + t, ext + e
        memo[name] = (triton, ext)
        return triton, ext

    triton, ext = visit(entry, frozenset({entry}))
    cuda = _cuda_launches(tree) if ext_names or ext_getters else 0
    return LaunchCount(triton=triton, extension=ext, cuda=cuda)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_triton_kernel(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    # `@triton.jit`, `@jit` (from triton import jit), `@triton.jit(...)`; autotune and
    # heuristics wrap a jit function and keep the `kernel[grid](...)` launch syntax.
    return any(_dotted(d).split(".")[-1] == "jit" for d in fn.decorator_list)


def _is_load_inline(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] == "load_inline"


def _extension_handles(
    tree: ast.Module, functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
) -> tuple[set[str], set[str]]:
    """Names bound to a load_inline module, and functions that return one (lazy builders)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_load_inline(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    getters: set[str] = set()
    for name, fn in functions.items():
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None:
                v = node.value
                if _is_load_inline(v) or (isinstance(v, ast.Name) and v.id in names):
                    getters.add(name)
    return names, getters


def _is_extension(node: ast.expr, names: set[str], getters: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in names
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in getters
    )


def _cuda_launches(tree: ast.Module) -> int:
    return sum(
        len(_CUDA_LAUNCH.findall(node.value))
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )
