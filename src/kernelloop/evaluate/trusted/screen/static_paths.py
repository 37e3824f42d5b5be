"""The static screen's rules for dotted paths and strings (`torch.cuda.Stream`, `triton.jit`, a
module's private names): which a candidate of each language may use, and the path an
expression names through its imported root (static.py applies them to every attribute,
call and assignment target)."""

from __future__ import annotations

import ast

from kernelloop.evaluate.trusted.screen.static_rules import (
    ALLOWED_DUNDER_STRINGS,
    ALLOWED_DUNDERS,
    CPP_EXTENSION_ALLOWED,
    CUDA_ALLOWED,
    FRAME_ATTRS,
    HIDDEN_WORK_ATTRS,
    REFUSED_PATHS,
    TORCH_ALLOWED,
    TORCH_DENIED,
    TORCH_RNG,
    TRITON_ALLOWED,
)
from kernelloop.evaluate.trusted.screen.static_scope import format_reach, names_internal


def public_attribute(name: str) -> bool:
    """Whether `getattr(obj, name)` with this constant name is plain `obj.name`: a public
    identifier that is neither a frame attribute nor one that hides work."""
    return (
        name.isidentifier()
        and not name.startswith("_")
        and name not in FRAME_ATTRS
        and name not in HIDDEN_WORK_ATTRS
    )


def string_problems(value: str) -> list[str]:
    """Why a string constant in a candidate is refused: it spells an interpreter internal
    (an attribute path through a dunder) or a format template that reads private
    attributes."""
    out = []
    if internal := names_internal(value, ALLOWED_DUNDER_STRINGS):
        out.append(
            f"has the string {value[:60]!r}, which names `{internal}`, an interpreter "
            f"internal; candidates may not reach attributes by name"
        )
    if field := format_reach(value):
        out.append(
            f"has a format template reading `{field[:60]}`; str.format may not read private "
            "attributes"
        )
    return out


def dotted_path(node: ast.AST, aliases: dict[str, str], getattr_ok: set[int]) -> str | None:
    """The dotted path an expression names when its root is an imported name; allowed
    `getattr(x, "name")` calls count as `x.name`."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call) and id(node.func) in getattr_ok:
            parts.append(node.args[1].value)
            node = node.args[0]
        else:
            break
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def path_problem(path: str, language: str, draws: bool) -> str | None:
    """Why a candidate of `language` may not use the dotted `path`, or None."""
    parts = path.split(".")
    root, rest = parts[0], parts[1:]
    for k in range(2, len(parts) + 1):
        why = REFUSED_PATHS.get(".".join(parts[:k]))
        if why:
            return f"uses `{'.'.join(parts[:k])}`, which {why}; candidates may not"
    if not rest:
        return None
    if root == "torch":
        return _torch_problem(path, rest, language, draws)
    if root == "triton":
        if rest[0] not in TRITON_ALLOWED:
            allowed = ", ".join(sorted(TRITON_ALLOWED))
            return f"uses `{path}`; a candidate may use only triton.{{{allowed}}}"
        return None
    if any(p.startswith("_") and p not in ALLOWED_DUNDERS for p in rest):
        return f"uses `{path}`, a private name; use public APIs only"
    return None


def _torch_problem(path: str, rest: list[str], language: str, draws: bool) -> str | None:
    if language == "torch":
        for k in (1, 2):
            if ".".join(rest[:k]) in TORCH_DENIED:
                return f"uses `{path}`, which hides work from the timer or reaches torch internals"
        if rest[0].startswith("_") and rest[0] not in ALLOWED_DUNDERS:
            return f"uses `{path}`, a private torch name"
        return None
    if language == "cuda" and rest[0] == "utils":
        if rest[1:2] == ["cpp_extension"] and (len(rest) == 2 or rest[2] in CPP_EXTENSION_ALLOWED):
            return None
        return (
            f"uses `{path}`; a CUDA candidate may use only "
            "torch.utils.cpp_extension.load_inline/load"
        )
    if rest[0] == "nn" and (len(rest) == 1 or rest[1][:1].isupper()):
        # nn.Module, nn.Parameter, nn.Linear...: the holders of a KernelBench-style
        # solution's weights; whatever they compute, the op audit sees
        return None
    if rest[0] not in TORCH_ALLOWED and not (draws and rest[0] in TORCH_RNG):
        return (
            f"uses `{path}`; a {language} candidate may take from torch only allocation, "
            "dtypes and device queries, and must do its compute in its own kernels"
        )
    if rest[0] == "cuda" and len(rest) > 1 and rest[1] not in CUDA_ALLOWED:
        return (
            f"uses `{path}`; streams, events, graphs and allocator calls are not allowed "
            "(work must stay visible to the timer)"
        )
    return None
