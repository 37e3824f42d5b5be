"""The judge's interface checks: what a worker reports about each call (output type,
shape, dtype, device, aliasing, mutation of inputs, launches, PyTorch ops) checked against
the contract, and the audit of its PyTorch ops (a part of judge.Judge)."""

from __future__ import annotations

import torch

from kernelloop.evaluate.protocol import ALLOC_VIEW_OPS, RNG_FILL_OPS, RNG_PACKETS
from kernelloop.evaluate.trusted.channel.text import candidate_text
from kernelloop.evaluate.trusted.values.plan import Call
from kernelloop.evaluate.trusted.values.record import CheckResult

# What the RecordFunction trace may see outside launches besides ALLOC_VIEW_OPS: composite
# ops that only wrap a view, a no-op conversion or a scalar read. When they do real work,
# the work shows in the trace as a nested op that is not on either list (`to` → `_to_copy`,
# `contiguous` → `clone`), so allowing the wrapper lets no compute through.
TRACE_ALLOWED = ALLOC_VIEW_OPS | {
    "to",
    "item",
    "narrow",
    "view_as",
    "expand_as",
    "reshape_as",
    "_reshape_alias",
    "split_with_sizes",
    "movedim",
    "swapaxes",
    "swapdims",
    "resize_",
    "result_type",
}


class InterfaceMixin:
    def _interface(
        self, call: Call, msg: dict, like: torch.Tensor, parts: list[torch.Tensor] | None = None
    ) -> bool:
        problems = []
        # Facts about harness state come first: they decide the category when present.
        if msg.get("tampered"):
            problems.append(
                (
                    "tamper",
                    f"replaced harness functions during the call: {', '.join(msg['tampered'][:5])}",
                )
            )
        if msg.get("threads"):
            problems.append(
                (
                    "deferred",
                    f"left {msg['threads']} Python thread(s) running after it returned (work "
                    "deferred past the call)",
                )
            )
        if msg.get("changed_after_return"):
            problems.append(
                (
                    "deferred",
                    "its output kept changing after the call returned (work deferred past the "
                    "call)",
                )
            )
        if msg.get("reuses_output"):
            problems.append(
                (
                    "aliasing",
                    "returned the storage it returned for an earlier call (a persistent buffer or "
                    "a replayed result)",
                )
            )
        several = parts is not None and (len(parts) > 1 or like.dtype != parts[0].dtype)
        if several:
            self._interface_parts(msg, parts, problems)
        elif msg.get("out_type") != "torch.Tensor":
            problems.append(
                (
                    "interface",
                    f"returned {candidate_text(msg.get('out_type'), 120)}, not exactly a "
                    "torch.Tensor",
                )
            )
        else:
            if msg.get("out_shape") != list(like.shape):
                problems.append(
                    (
                        "interface",
                        f"output shape {msg.get('out_shape')}, expected {list(like.shape)}",
                    )
                )
            want = str(like.dtype).removeprefix("torch.")
            if msg.get("out_dtype") != want:
                problems.append(
                    ("interface", f"output dtype {msg.get('out_dtype')}, expected {want}")
                )
            if msg.get("out_device") != like.device.type:
                problems.append(
                    ("interface", f"output on {msg.get('out_device')}, expected {like.device.type}")
                )
            if not msg.get("out_contiguous", False):
                problems.append(("interface", "output is not contiguous"))
            if msg.get("aliases"):
                problems.append(
                    ("aliasing", f"output shares memory with input(s) {_few(msg['aliases'])}")
                )
            if msg.get("mutated"):
                problems.append(
                    ("mutation", f"input(s) {_few(msg['mutated'])} were modified in place")
                )
        for category, reason in problems:
            self._fail(call, "interface", category, reason)
        key = f"{call.shape.label}-{call.dtype}"
        if problems:
            self._interface_bad.add(key)
        return not problems

    def _interface_parts(self, msg: dict, parts: list[torch.Tensor], problems: list) -> None:
        """The interface of a call that must return several outputs (a tuple of tensors)."""
        got = msg.get("out_parts") or []
        if msg.get("out_type") not in ("builtins.tuple", "builtins.list") or len(got) != len(parts):
            problems.append(
                (
                    "interface",
                    f"returned {candidate_text(msg.get('out_type'), 120)} with {len(got)} "
                    f"tensor(s), expected a tuple of {len(parts)} torch.Tensor",
                )
            )
            return
        for k, (g, want) in enumerate(zip(got, parts, strict=True)):
            dtype = str(want.dtype).removeprefix("torch.")
            if g["shape"] != list(want.shape):
                problems.append(
                    ("interface", f"output {k} shape {g['shape']}, expected {list(want.shape)}")
                )
            if g["dtype"] != dtype:
                problems.append(("interface", f"output {k} dtype {g['dtype']}, expected {dtype}"))
            if g["device"] != want.device.type:
                problems.append(
                    ("interface", f"output {k} on {g['device']}, expected {want.device.type}")
                )
            if not g["contiguous"]:
                problems.append(("interface", f"output {k} is not contiguous"))
        if msg.get("aliases"):
            problems.append(("aliasing", f"outputs share memory with {_few(msg['aliases'])}"))
        if msg.get("mutated"):
            problems.append(("mutation", f"input(s) {_few(msg['mutated'])} were modified in place"))

    def _audit(self, call: Call, msg: dict) -> None:
        """The op audit: PyTorch compute or no launch of its own kernels → `no_kernel`.

        Both layers run in the candidate's process (a dispatch-mode recorder and a
        RecordFunction trace, worker/op_audit.py), so this is policy, never a defence: what
        they report can only reject. Each must be there on an audited call."""
        launches = sum(
            v
            for k, v in (_counts(msg.get("launches", {})) or {}).items()
            if k.startswith("candidate:")
        )
        self.launches.append(launches)
        if call.count_kernels and isinstance(msg.get("device_kernels"), int):
            self.device_kernels.append(msg["device_kernels"])
        language = self.task.spec.task.language
        if language == "torch":
            return  # PyTorch compute is the point of these tasks
        mode_ops = _counts(msg.get("ops", {}))
        traced = _counts(msg.get("traced_ops")) if call.audit else {}
        if call.audit and (
            mode_ops is None or traced is None or not isinstance(msg.get("trace_error", ""), str)
        ):
            self._fail(
                call,
                "interface",
                "protocol",
                "the worker's op audit report is missing or malformed",
            )
            return
        if call.audit and msg.get("trace_error"):
            self._fail(
                call,
                "interface",
                "tamper",
                f"the op audit did not cover the call: {str(msg['trace_error'])[:200]}",
            )
        # A task whose model draws random numbers: its random fills are not compute. The
        # recorder names their overload (scalar moments only); the trace sees bare names, so
        # a fill with a tensor of probabilities is still caught by the recorder's name.
        fills = RNG_FILL_OPS if self.draws else set()
        traced_fills = RNG_PACKETS if fills else set()
        compute = sorted(
            {op for op in (mode_ops or {}) if op not in ALLOC_VIEW_OPS and op not in fills}
            | {
                op
                for op in (traced or {})
                if op not in TRACE_ALLOWED and op.split(".")[0] not in traced_fills
            }
        )
        if compute:
            shown = ", ".join(compute[:8]) + (", …" if len(compute) > 8 else "")
            # One trivial copy kernel does not make PyTorch compute a kernel (issue 12).
            own = (
                f" (its {launches} launch(es) of its own kernels do not excuse it)"
                if launches
                else ""
            )
            self._fail(
                call,
                "interface",
                "no_kernel",
                f"calls PyTorch compute ops [{shown}] instead of its own {language} kernels{own}",
            )
        if language == "triton" and launches == 0:
            self._fail(call, "interface", "no_kernel", "launched none of its own Triton kernels")

    def finish_interface(self, shapes_dtypes: list[tuple[str, str]]) -> None:
        for shape, dtype in shapes_dtypes:
            if f"{shape}-{dtype}" not in self._interface_bad:
                self.checks.append(
                    CheckResult(
                        suite="interface",
                        case="all",
                        shape=shape,
                        dtype=dtype,
                        passed=True,
                        reason="exact Tensor, shape, dtype, device, contiguous, no aliasing, "
                        "inputs unchanged",
                    )
                )


def _counts(value) -> dict[str, int] | None:
    """A worker's {name: count} map, or None when it is missing or not one (untrusted input)."""
    if not isinstance(value, dict) or len(value) > 10_000:
        return None
    if not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        return None
    return {k[:200]: v for k, v in value.items()}


def _few(names: list[str], n: int = 8) -> str:
    """A list of worker-reported names for a reason: at most `n`, then how many more."""
    shown = repr(list(names[:n]))
    return shown if len(names) <= n else f"{shown} and {len(names) - n} more"
