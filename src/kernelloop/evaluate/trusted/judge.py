"""Trusted-side judgement of each call the worker reports: interface, values, randomness.

The trusted side regenerates the call's inputs from the secret seed, runs the reference
in float64 and compares the bytes the worker wrote. Nothing the worker claims about
correctness is used; its facts (type, aliasing, mutation, launches) can only reject.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from kernelloop.evaluate.protocol import ALLOC_VIEW_OPS
from kernelloop.evaluate.trusted.compare import (
    Comparison,
    binomial_ok,
    infer_mask,
    within_tolerance,
)
from kernelloop.evaluate.trusted.outputs import OutputDir
from kernelloop.evaluate.trusted.plan import Call
from kernelloop.evaluate.trusted.record import CheckResult
from kernelloop.evaluate.trusted.refcache import References
from kernelloop.evaluate.trusted.sensitivity import Sensitivity, matching_trivial, trivial_outputs
from kernelloop.evaluate.trusted.text import (  # noqa: F401  (last_line: re-exported)
    candidate_text,
    compiler_lines,
    last_line,
)
from kernelloop.task import Task
from kernelloop.task.generic_cases import with_generic_cases
from kernelloop.task.spec import Tolerance

EXACT = Tolerance(atol=0.0, rtol=0.0)

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


@dataclass
class Failure:
    category: str
    reason: str


@dataclass
class Judge:
    task: Task
    device: str
    # The round's (or this evaluation's) reference cache; None computes every reference.
    references: References | None = None
    checks: list[CheckResult] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    launches: list[int] = field(default_factory=list)
    _groups: dict[str, dict] = field(default_factory=dict)
    _interface_bad: set[str] = field(default_factory=set)
    sensitivity: Sensitivity = field(default_factory=Sensitivity)

    def __post_init__(self) -> None:
        self.make_inputs = with_generic_cases(self.task.load_function("inputs"))
        self.reference = self.task.load_function("reference")
        self.st = self.task.spec.stochastic
        self._digest = self.task.digest() if self.references is not None else ""

    # ---- helpers -------------------------------------------------------------
    def _inputs(self, call: Call) -> dict:
        g = torch.Generator(device=self.device).manual_seed(call.input_seed)
        return self.make_inputs(
            call.shape.dims, getattr(torch, call.dtype), self.device, g, call.case
        )

    def _ref(self, inputs: dict, call: Call, keep_mask=None) -> torch.Tensor:
        up = {
            k: (v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
            for k, v in inputs.items()
        }
        params = {**self.task.spec.params, **call.params}
        if keep_mask is not None and self.st is not None:
            params[self.st.mask_param] = keep_mask
        with torch.no_grad():
            return self.reference(**up, **params)

    def _fail(self, call: Call, suite: str, category: str, reason: str, cmp=None) -> None:
        self.checks.append(
            CheckResult(
                suite=suite,
                case=call.case,
                shape=call.shape.label,
                dtype=call.dtype,
                passed=False,
                max_abs_err=getattr(cmp, "max_abs_err", None),
                max_rel_err=getattr(cmp, "max_rel_err", None),
                worst_index=getattr(cmp, "worst_index", None),
                reason=reason,
            )
        )
        self.failures.append(
            Failure(category, f"{suite}/{call.case} {call.shape.label} {call.dtype}: {reason}")
        )

    def _pass(self, call: Call, suite: str, cmp=None, note: str = "") -> None:
        self.checks.append(
            CheckResult(
                suite=suite,
                case=call.case,
                shape=call.shape.label,
                dtype=call.dtype,
                passed=True,
                max_abs_err=getattr(cmp, "max_abs_err", None),
                max_rel_err=getattr(cmp, "max_rel_err", None),
                reason=note,
            )
        )

    # ---- one reported call ---------------------------------------------------
    def judge(self, call: Call, msg: dict, outputs: OutputDir) -> None:
        """Judge one validated `call` message (channel.parse); its output file is read from
        `outputs` by the call's own id, and gone afterwards whatever happens. Raises
        OutputError when that file breaks the protocol."""
        try:
            self._judge(call, msg, outputs)
        finally:
            outputs.discard(call.id)

    def _judge(self, call: Call, msg: dict, outputs: OutputDir) -> None:
        if not msg.get("ok"):
            error = msg.get("error", "")
            if (lines := compiler_lines(error)) is not None:
                self._fail(call, call.suite, "compile", f"its kernel failed to compile: {lines}")
            else:
                self._fail(call, call.suite, "crash", f"the candidate raised {last_line(error)}")
            return
        inputs = self._inputs(call)
        like = self.output_like(call, inputs)
        if not self._interface(call, msg, like, self.output_parts(call, inputs)):
            return
        self._audit(call, msg)
        out = read_output(outputs, call.id, like).to(self.device)
        tol = self.tolerance(call, like)
        stochastic = call.suite == "stochastic" and call.rate > 0
        refs = self.value_refs(call, inputs)
        if "ref" in refs or "keep" in refs:
            trivial = trivial_outputs(inputs, like, refs.get("ref", refs.get("keep")))
        else:
            trivial = self._trivial_parts(call, inputs, refs)
        self._prove(call, trivial, refs, tol)
        if stochastic:
            self._stochastic(call, out, refs, tol, trivial)
            return
        cmp = self._compare(call, out, refs, tol)
        if not cmp.passed:
            self._fail_values(call, call.suite, cmp.category, cmp.reason, cmp, out, trivial, tol)
        elif call.suite == "determinism":
            self._determinism(call, out, cmp)
        else:
            self._pass(call, call.suite, cmp)

    def output_like(self, call: Call, inputs: dict | None = None) -> torch.Tensor:
        """What the call's output must look like (shape, dtype, device): the input the task
        names as `output_like`, or — a task that names none — the reference's output for
        these inputs, in the call's dtype when it is floating point and in the reference's
        own dtype otherwise (indices, counts, masks), on the judge's device."""
        given = self._inputs(call) if inputs is None else inputs
        name = self.task.spec.task.output_like
        if name:
            return given[name]
        parts = self.output_parts(call, given)
        if len(parts) == 1 and "ref" in self.value_refs(call, given):
            return parts[0]
        # Several outputs travel as one: every part's bytes in order (worker/calls.packed).
        total = sum(p.numel() * p.element_size() for p in parts)
        return torch.empty(total, dtype=torch.uint8, device=self.device)

    def output_parts(self, call: Call, inputs: dict | None = None) -> list[torch.Tensor]:
        """Each output the call must return (a task whose reference returns a tuple has
        several), as empty tensors of its shape and dtype: the call's dtype for floating
        point, the reference's own otherwise."""
        given = self._inputs(call) if inputs is None else inputs
        name = self.task.spec.task.output_like
        if name:
            return [given[name]]
        return self._part_likes(call, self.value_refs(call, given))

    def _part_likes(self, call: Call, refs: dict) -> list[torch.Tensor]:
        """`output_parts` from the call's references (no inputs regenerated)."""
        refs_list = [refs["ref"]] if "ref" in refs else _parts(refs)
        return [
            torch.empty(
                r.shape,
                dtype=getattr(torch, call.dtype) if r.is_floating_point() else r.dtype,
                device=self.device,
            )
            for r in refs_list
        ]

    def _compare(self, call: Call, out: torch.Tensor, refs: dict, tol) -> Comparison:
        """The value check of `out` against the float64 reference(s): one output with `tol`;
        several (the packed bytes unpacked) each with its own dtype's tolerance, the first
        failing one named."""
        if "ref" in refs:
            return within_tolerance(out, refs["ref"], tol)
        outs = unpack(out, self._part_likes(call, refs))
        cmps = [
            within_tolerance(o, r, self.tolerance(call, o))
            for o, r in zip(outs, _parts(refs), strict=True)
        ]
        for k, c in enumerate(cmps):
            if not c.passed:
                return replace(c, reason=f"output {k}: {c.reason}")
        return max(cmps, key=lambda c: c.max_abs_err or 0.0)

    def _trivial_parts(self, call: Call, inputs: dict, refs: dict) -> dict[str, torch.Tensor]:
        """Trivial outputs of a call with several outputs: each output's trivial variants
        (trivial_outputs) with the other outputs exact, packed as the worker packs them —
        so every output is proven checked, not only the first."""
        likes = self.output_parts(call, inputs)
        exact = [r.to(like.dtype).to(self.device) for r, like in zip(_parts(refs), likes,
                                                                       strict=True)]  # fmt: skip
        out = {}
        for k, like in enumerate(likes):
            for name, t in trivial_outputs(inputs, like, _parts(refs)[k]).items():
                parts = [*exact[:k], t.to(self.device), *exact[k + 1 :]]
                out[f"output {k}: {name}"] = torch.cat(
                    [p.contiguous().reshape(-1).view(torch.uint8) for p in parts]
                )
        return out

    def tolerance(self, call: Call, like: torch.Tensor):
        """The call's tolerance: the task's for its dtype; an integer or boolean output is
        compared exactly (an index one off is a wrong index, whatever its size)."""
        if like.is_floating_point() or like.is_complex():
            return self.task.spec.tolerances[call.dtype]
        return EXACT

    # ---- trivial outputs -------------------------------------------------------
    def _value_fails(self, call: Call, out: torch.Tensor, refs: dict, tol) -> bool:
        """Would `out` fail this call's own value check (the one the candidate gets)?"""
        return self._value_reason(call, out, refs, tol) is not None

    def _value_reason(self, call: Call, out: torch.Tensor, refs: dict, tol) -> str | None:
        """Why `out` fails the value check against `refs` (tolerance against the float64
        reference; for a stochastic call, mask inference and the binomial test of its
        rate), or None when it passes."""
        if "keep" not in refs:
            cmp = self._compare(call, out, refs, tol)
            return None if cmp.passed else cmp.reason
        inf = infer_mask(out, refs["keep"], refs["drop"], tol)
        if not inf.ok:
            return f"p={call.rate:g}: {inf.reason}"
        n = int(inf.decidable.sum().item())
        dropped = int((inf.dropped & inf.decidable).sum().item())
        ok, text = binomial_ok(dropped, n, call.rate, self.st.confidence_sigmas)
        return None if ok else f"p={call.rate:g}: {text}"

    def value_refs(self, call: Call, inputs: dict | None = None) -> dict:
        """The float64 reference(s) of `call`: {"ref"}, or {"keep", "drop"} for a stochastic
        call (every element kept, every element dropped). From the reference cache when
        the judge has one (refcache.py: keyed by everything the reference depends on)."""

        def compute() -> dict:
            given = self._inputs(call) if inputs is None else inputs
            if call.suite == "stochastic" and call.rate > 0:
                like = given[self.task.spec.task.output_like]  # required with [stochastic]
                ones = torch.ones_like(like, dtype=torch.bool)
                return {
                    "keep": self._ref(given, call, keep_mask=ones),
                    "drop": self._ref(given, call, keep_mask=~ones),
                }
            ref = self._ref(given, call)
            if isinstance(ref, tuple | list):  # several outputs: "ref.0", "ref.1", ...
                return {f"ref.{k}": r for k, r in enumerate(ref)}
            return {"ref": ref}

        if self.references is None:
            return compute()
        return self.references.get(self._ref_key(call), self.device, compute)

    def _ref_key(self, call: Call) -> tuple:
        """Everything a call's reference depends on: the task's exact files, the device,
        the inputs (seed, case, shape, dtype), the reference's keyword arguments, and
        whether it is the kept/dropped pair of a stochastic call."""
        params = {**self.task.spec.params, **call.params}
        return (
            self._digest,
            self.device,
            call.input_seed,
            call.case,
            tuple(sorted(call.shape.dims.items())),
            call.dtype,
            tuple(sorted((k, repr(v)) for k, v in params.items())),
            call.suite == "stochastic" and call.rate > 0,
        )

    def value_problem(self, call: Call, out: torch.Tensor, refs: dict | None = None) -> str | None:
        """The value check of one output on `call`'s inputs — the same comparison as every
        judged call — without interface facts or proofs (the benchmark's timed outputs)."""
        refs = self.value_refs(call) if refs is None else refs
        return self._value_reason(call, out.to(self.device), refs, self.tolerance(call, out))

    def _prove(self, call: Call, trivial: dict, refs: dict, tol) -> None:
        for name in self.sensitivity.pending(list(trivial)):
            if self._value_fails(call, trivial[name].to(self.device), refs, tol):
                self.sensitivity.mark(
                    name, f"{call.suite}/{call.case} {call.shape.label} {call.dtype}"
                )

    def _fail_values(
        self, call: Call, suite: str, category: str, reason: str, cmp, out, trivial, tol
    ) -> None:
        """A failed value check, named `trivial` when the output is one of the trivial outputs."""

        refs_of_call = self.value_refs(call)
        likes = self._part_likes(call, refs_of_call)

        def close(a, b):
            if "ref" in refs_of_call:
                return within_tolerance(a, b.to(torch.float64), tol).passed
            # packed parts: the same per-output comparison, with `b` as the reference
            parts = {f"ref.{k}": r.to(torch.float64) for k, r in enumerate(unpack(b, likes))}
            return self._compare(call, a, parts, tol).passed

        name = matching_trivial(out, {k: v.to(self.device) for k, v in trivial.items()}, close)
        if name is not None:
            category, reason = "trivial", f"the output is {name}, not a computed result ({reason})"
        self._fail(call, suite, category, reason, cmp)

    def finish_sensitivity(self, prove: bool = True) -> None:
        """Record the proof; an unproven plan rejects, because a pass would then prove nothing.
        `prove=False` (already rejected elsewhere) only records what was caught."""
        for name, where in sorted(self.sensitivity.caught.items()):
            self.checks.append(
                CheckResult(
                    suite="sensitivity",
                    case=name,
                    shape="all",
                    dtype="all",
                    passed=True,
                    reason=f"a trivial output ({name}) fails {where}",
                )
            )
        if self.failures or not prove:
            return  # already rejected: an incomplete proof adds nothing
        for name in self.sensitivity.uncaught():
            reason = (
                f"no planned check rejects a trivial output ({name}), so a pass would prove "
                "nothing; tighten the task's tolerances or add an input case where it differs "
                "from the reference"
            )
            self.checks.append(
                CheckResult(
                    suite="sensitivity",
                    case=name,
                    shape="all",
                    dtype="all",
                    passed=False,
                    reason=reason,
                )
            )
            self.failures.append(Failure("setup", f"sensitivity: {reason}"))

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
        RecordFunction trace, worker/calls.py), so this is policy, never a defence: what
        they report can only reject. Each must be there on an audited call."""
        launches = sum(
            v
            for k, v in (_counts(msg.get("launches", {})) or {}).items()
            if k.startswith("candidate:")
        )
        self.launches.append(launches)
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
        compute = sorted(
            {op for op in (mode_ops or {}) if op not in ALLOC_VIEW_OPS}
            | {op for op in (traced or {}) if op not in TRACE_ALLOWED}
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

    def _determinism(self, call: Call, out: torch.Tensor, cmp) -> None:
        grp = self._groups.setdefault(call.group, {})
        if call.role == "a":
            grp["a"] = out
            self._pass(call, "determinism", cmp, "first of two identical calls")
        elif "a" in grp:
            if _same_bytes(grp.get("a"), out):
                self._pass(call, "determinism", cmp, "identical bytes on a repeated call")
            else:
                self._fail(
                    call,
                    "determinism",
                    "nondeterministic",
                    "two calls with the same inputs and seed gave different bytes (a race or "
                    "hidden state)",
                )
            grp.pop("a", None)

    def _stochastic(self, call: Call, out: torch.Tensor, refs: dict, tol, trivial: dict) -> None:
        assert self.st is not None
        inf = infer_mask(out, refs["keep"], refs["drop"], tol)
        if not inf.ok:
            self._fail_values(
                call,
                "stochastic",
                "stochastic",
                f"p={call.rate:g}: {inf.reason}",
                None,
                out,
                trivial,
                tol,
            )
            return
        n = int(inf.decidable.sum().item())
        dropped = int((inf.dropped & inf.decidable).sum().item())
        ok, text = binomial_ok(dropped, n, call.rate, self.st.confidence_sigmas)
        grp = self._groups.setdefault(call.group, {})
        if not ok:
            self._fail_values(
                call,
                "stochastic",
                "stochastic",
                f"p={call.rate:g}: {text}",
                None,
                out,
                trivial,
                tol,
            )
            return
        if call.role == "a":
            grp.update(out=out, mask=inf.dropped, dec=inf.decidable)
            self._pass(call, "stochastic", None, f"p={call.rate:g}: {text}")
        elif call.role == "same_seed":
            if "out" in grp and not _same_bytes(grp["out"], out):
                # the same inputs and seed, different bytes: a race or hidden state, whichever
                # suite happened to see it first
                self._fail(
                    call,
                    "stochastic",
                    "nondeterministic",
                    f"p={call.rate:g}: two calls with the same inputs and seed gave different "
                    "bytes (a race or hidden state)",
                )
            else:
                self._pass(call, "stochastic", None, f"p={call.rate:g}: same seed, same output")
        elif call.role == "other_seed" and "mask" in grp:
            both = grp["dec"] & inf.decidable
            m = int(both.sum().item())
            differ = int(((grp["mask"] != inf.dropped) & both).sum().item())
            expect = 2 * call.rate * (1 - call.rate)
            ok2, text2 = binomial_ok(differ, m, expect, self.st.confidence_sigmas)
            if differ == 0 or not ok2:
                self._fail(
                    call,
                    "stochastic",
                    "stochastic",
                    f"p={call.rate:g}: a different seed must give an independent mask; {text2} "
                    "(differing)",
                )
            else:
                self._pass(
                    call,
                    "stochastic",
                    None,
                    f"p={call.rate:g}: a different seed gave a different mask",
                )
            self._groups.pop(call.group, None)

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


def _same_bytes(a: torch.Tensor | None, b: torch.Tensor) -> bool:
    if a is None or a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(
        torch.equal(
            a.contiguous().reshape(-1).view(torch.uint8),
            b.contiguous().reshape(-1).view(torch.uint8),
        )
    )


def _parts(refs: dict) -> list[torch.Tensor]:
    return [refs[f"ref.{k}"] for k in range(len(refs))]


def unpack(packed: torch.Tensor, likes: list[torch.Tensor]) -> list[torch.Tensor]:
    """Several outputs from their packed bytes (worker/calls.packed), each shaped like
    its `like`."""
    flat = packed.reshape(-1).view(torch.uint8)
    out, at = [], 0
    for like in likes:
        n = like.numel() * like.element_size()
        out.append(flat[at : at + n].view(like.dtype).reshape(like.shape))
        at += n
    return out


def read_output(outputs: OutputDir, call_id: str, like: torch.Tensor) -> torch.Tensor:
    """The call's output bytes (outputs.read checks the file) as a tensor shaped like `like`."""
    nbytes = like.numel() * like.element_size()
    raw = outputs.read(call_id, nbytes)
    if nbytes == 0:
        return torch.empty_like(like, device="cpu")
    return torch.frombuffer(raw, dtype=torch.uint8).view(like.dtype).reshape(like.shape)


def _few(names: list[str], n: int = 8) -> str:
    """A list of worker-reported names for a reason: at most `n`, then how many more."""
    shown = repr(list(names[:n]))
    return shown if len(names) <= n else f"{shown} and {len(names) - n} more"
