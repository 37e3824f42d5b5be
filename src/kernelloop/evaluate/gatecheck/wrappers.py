"""Mutants that wrap the kernel's entry: shape- or parameter-conditional shortcuts (the
output is wrong only when a condition holds) and output caching across calls (a
module-level dict keyed by shape or by input address).

They are written as an attacker who knows the op audit would write them: no PyTorch
compute outside Triton launches. A shortcut reads scalars (`.item()`, sizes) and corrupts
one element with `fill_` (both allowed, protocol.ALLOC_VIEW_OPS); a cache copies its
outputs with its own Triton kernel, never `clone()`. So what kills them is the gate's
value, state and shape checks, not the audit noticing a torch op."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import replace

from kernelloop.evaluate.gatecheck.edits import Source, Variant, diff

HELPERS = """

# --- gate-check mutant helpers ---
import torch as _kl_torch
import triton as _kl_triton
import triton.language as _kl_tl

_KL_CACHE = {}


def _kl_tensors(*args):
    return [a for a in args if isinstance(a, _kl_torch.Tensor)]


def _kl_corrupt(out):
    first = out[0] if isinstance(out, (tuple, list)) else out
    flat = first.view(-1)
    value = flat[-1].item()
    flat[-1:].fill_(value * 2.0 + 1.0)
    return out


@_kl_triton.jit
def _kl_copy(src, dst, n):
    offs = _kl_tl.program_id(0) * 1024 + _kl_tl.arange(0, 1024)
    m = offs < n
    _kl_tl.store(dst + offs, _kl_tl.load(src + offs, mask=m), mask=m)


def _kl_clone(out):
    if isinstance(out, (tuple, list)):
        return type(out)(_kl_clone(o) for o in out)
    dst = _kl_torch.empty_like(out)
    n = out.numel()
    _kl_copy[(_kl_triton.cdiv(n, 1024),)](out, dst, n)
    return dst
"""


def entry_function(src: Source, entry: str, model_class: str | None) -> ast.FunctionDef | None:
    """The task's entry: a module-level function, or a KernelBench solution's
    `ModelNew.forward` (`model_class`)."""
    for node in src.tree.body:
        if model_class is None and isinstance(node, ast.FunctionDef) and node.name == entry:
            return node
        if model_class is not None and isinstance(node, ast.ClassDef) and node.name == model_class:
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "forward":
                    return f
    return None


def _call_args(f: ast.FunctionDef, method: bool) -> tuple[str, list[str]]:
    """The forwarding call's argument text and the names of every argument (without self)."""
    a = f.args
    pos = [x.arg for x in a.posonlyargs + a.args][1 if method else 0 :]
    parts = list(pos)
    if a.vararg:
        parts.append(f"*{a.vararg.arg}")
    parts += [f"{k.arg}={k.arg}" for k in a.kwonlyargs]
    if a.kwarg:
        parts.append(f"**{a.kwarg.arg}")
    names = pos + [k.arg for k in a.kwonlyargs]
    return ", ".join(parts), names


def _wrap(src: Source, f: ast.FunctionDef, method: bool, operator: str, body: str, why: str):
    """`f` renamed `_kl_orig_<name>` and a function of the same signature put after it
    whose body is `body` (`{call}` is the forwarding call); the helpers appended."""
    indent = " " * f.col_offset
    line_start = src.span(f)[0] - f.col_offset
    def_line = src.text.encode()[line_start:].split(b"\n", 1)[0].decode()
    name_at = line_start + len(def_line.split("def ", 1)[0]) + len("def ")
    orig = f"_kl_orig_{f.name}"
    call_args, _ = _call_args(f, method)
    target = f"self.{orig}" if method else orig
    call = f"{target}({call_args})"
    inner = indent + "    "
    text = "\n".join(inner + ln if ln else ln for ln in body.format(call=call).split("\n"))
    new_def = f"\n\n{indent}def {f.name}({ast.unparse(f.args)}):\n{text}"
    end = src.line_end(f.end_lineno)
    v = src.edit_spans(
        operator,
        f.lineno,
        [
            (name_at, name_at + len(f.name), orig),
            (end, end, new_def),
            (len(src.text.encode()), len(src.text.encode()), HELPERS),
        ],
        why,
    )
    # The diff a person reads: the wrapper, the helpers named (they are the same in every
    # wrapping mutant).
    shown = diff(src.text, v.source.removesuffix(HELPERS), src.name)
    return replace(v, diff=shown + "+ (the gate-check helpers _kl_* appended at the end)\n")


def shortcuts(src: Source, ctx: dict) -> Iterator[Variant]:
    """The output made wrong (its last element) only when a condition holds: rows past 64
    and not a multiple of 64; a first dimension above every declared shape's; an odd
    last dimension; dropout on (p > 0) with every input non-zero (no all-zero case, the tell
    of a judge's checking call); dropout off (p == 0); dropout above every rate the task
    declares (its `[stochastic] rates` and its parameter)."""
    f = entry_function(src, ctx["entry"], ctx["model_class"])
    if f is None:
        return
    method = ctx["model_class"] is not None
    _, names = _call_args(f, method)
    t = f"_kl_tensors({', '.join(names)})"
    rows = ctx["max_first_dim"]
    conds = {
        "rows > 64 and rows % 64 != 0": f"{t}[0].shape[0] > 64 and {t}[0].shape[0] % 64 != 0",
        "last dimension odd": f"{t}[0].shape[-1] % 2 == 1",
    }
    if not ctx["closed_shapes"]:  # past the declared shapes a closed task has no contract
        conds[f"the first dimension is above any declared ({rows})"] = f"{t}[0].shape[0] > {rows}"
    rate = ctx["rate"]
    if rate and rate in names:
        conds[f"{rate} > 0 and every input's first element non-zero"] = (
            f"{rate} > 0 and all(a.view(-1)[0].item() != 0 for a in {t})"
        )
        conds[f"{rate} == 0"] = f"{rate} == 0"
        top = ctx["max_rate"]
        conds[f"{rate} > {top} (above every rate the task declares)"] = f"{rate} > {top}"
    for why, cond in conds.items():
        body = f"_kl_out = {{call}}\nif {cond}:\n    _kl_out = _kl_corrupt(_kl_out)\nreturn _kl_out"
        yield _wrap(src, f, method, "shortcut", body, f"output wrong when {why}")


def caching(src: Source, ctx: dict) -> Iterator[Variant]:
    """The output computed once per key and replayed (copied by a Triton kernel) after:
    keyed by the inputs' shapes and dtypes and the non-seed parameters, or by the
    inputs' addresses."""
    f = entry_function(src, ctx["entry"], ctx["model_class"])
    if f is None:
        return
    method = ctx["model_class"] is not None
    _, names = _call_args(f, method)
    t = f"_kl_tensors({', '.join(names)})"
    scalars = [n for n in names if n != ctx["seed"]]
    others = ", ".join(f"{n}" for n in scalars)
    keys = {
        "shape": f"(tuple((tuple(a.shape), str(a.dtype)) for a in {t}), "
        f"tuple(repr(a) for a in ({others},) if not isinstance(a, _kl_torch.Tensor)))",
        "pointer": f"tuple((a.data_ptr(), tuple(a.shape)) for a in {t})",
    }
    for kind, key in keys.items():
        body = (
            f"_kl_key = {key}\n"
            "if _kl_key in _KL_CACHE:\n"
            "    return _kl_clone(_KL_CACHE[_kl_key])\n"
            "_kl_out = {call}\n"
            "_KL_CACHE[_kl_key] = _kl_clone(_kl_out)\n"
            "return _kl_out"
        )
        yield _wrap(src, f, method, "output_cache", body, f"output cached by {kind}")
