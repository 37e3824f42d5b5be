"""Trusted-side judgement of each call the worker reports: interface, values, randomness.

The trusted side regenerates the call's inputs from the secret seed, runs the reference
in float64 and compares the bytes the worker wrote. Nothing the worker claims about
correctness is used; its facts (type, aliasing, mutation, launches) can only reject.
The interface and op-audit checks are in judge_interface.py, determinism and kept state in
judge_state.py, the stochastic suite in judge_stochastic.py; this file: values,
references, trivial outputs.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass, field, replace

import torch

from kernelloop.evaluate.trusted.channel.outputs import OutputDir, OutputError
from kernelloop.evaluate.trusted.channel.staging import Staging
from kernelloop.evaluate.trusted.channel.text import (
    candidate_frame,
    compiler_lines,
    last_line,
)
from kernelloop.evaluate.trusted.values import diagnose, undeclared
from kernelloop.evaluate.trusted.values.compare import Comparison, within_tolerance
from kernelloop.evaluate.trusted.values.failure import Failure, TaskFault
from kernelloop.evaluate.trusted.values.judge_e2e import E2EMixin
from kernelloop.evaluate.trusted.values.judge_interface import InterfaceMixin
from kernelloop.evaluate.trusted.values.judge_state import StateMixin
from kernelloop.evaluate.trusted.values.judge_stochastic import StochasticMixin
from kernelloop.evaluate.trusted.values.judge_trivial import (
    TrivialMixin,
    parts_of,
    unpack,
)
from kernelloop.evaluate.trusted.values.oom import (
    harness_oom,
    release_reserved,
    retry_out_of_memory,
    trusted_oom,
)
from kernelloop.evaluate.trusted.values.own_error import OwnErrorMixin
from kernelloop.evaluate.trusted.values.plan import Call
from kernelloop.evaluate.trusted.values.record import CheckResult
from kernelloop.evaluate.trusted.values.refcache import References
from kernelloop.evaluate.trusted.values.sensitivity import (
    Sensitivity,
    trivial_outputs,
)
from kernelloop.task import Task
from kernelloop.task.generic_cases import atol_factor, with_generic_cases
from kernelloop.task.spec import Tolerance

EXACT = Tolerance(atol=0.0, rtol=0.0)


@dataclass
class Judge(InterfaceMixin, StateMixin, StochasticMixin, E2EMixin, OwnErrorMixin, TrivialMixin):
    task: Task
    device: str
    # The round's (or this evaluation's) reference cache; None computes every reference.
    references: References | None = None
    checks: list[CheckResult] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    launches: list[int] = field(default_factory=list)
    device_kernels: list[int] = field(default_factory=list)  # counted calls (count_kernels)
    _groups: dict[str, dict] = field(default_factory=dict)
    _interface_bad: set[str] = field(default_factory=set)
    sensitivity: Sensitivity = field(default_factory=Sensitivity)
    _diagnosed: int = 0
    _staging: Staging = field(default_factory=Staging)
    worker_share_bytes: int | None = None  # a worker's GPU share (worker_count.worker_share_bytes)

    def __post_init__(self) -> None:
        self.make_inputs = with_generic_cases(self.task.load_function("inputs"))
        self.reference = self.task.load_function("reference")
        self.st = self.task.spec.stochastic
        self.draws = self.task.draws()  # read once: the op audit asks on every audited call
        self._digest = self.task.digest() if self.references is not None else ""

    # ---- helpers -------------------------------------------------------------
    def _inputs(self, call: Call) -> dict:
        def make() -> dict:
            g = torch.Generator(device=self.device).manual_seed(call.input_seed)
            return self.make_inputs(
                call.shape.dims, getattr(torch, call.dtype), self.device, g, call.case
            )

        try:
            return retry_out_of_memory(make, self.device)
        except Exception as e:  # noqa: BLE001 - the task's own code, not the candidate's
            raise TaskFault(f"{type(e).__name__}: {str(e)[:200]}") from e

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
        reason = undeclared.reason(call.shape, category, reason)
        self._check(call, suite, False, cmp, reason)
        self.failures.append(
            Failure(category, f"{suite}/{call.case} {call.shape.label} {call.dtype}: {reason}")
        )

    def _pass(self, call: Call, suite: str, cmp=None, note: str = "") -> None:
        self._check(call, suite, True, cmp, note)

    def _check(self, call: Call, suite: str, passed: bool, cmp, reason: str) -> None:
        self.checks.append(
            CheckResult(
                suite=suite,
                case=call.case,
                shape=call.shape.label,
                dtype=call.dtype,
                passed=passed,
                max_abs_err=getattr(cmp, "max_abs_err", None),
                max_rel_err=getattr(cmp, "max_rel_err", None),
                tol_used=getattr(cmp, "tol_used", None),
                own_tol_used=self.own_share(call, cmp),
                worst_index=None if passed else getattr(cmp, "worst_index", None),
                reason=reason,
            )
        )

    # ---- one reported call ---------------------------------------------------
    def judge(self, call: Call, msg: dict, outputs: OutputDir) -> None:
        """Judge one validated `call` message (channel.parse); its output file is read from
        `outputs` by the call's own id, and gone afterwards whatever happens. Raises
        OutputError when that file breaks the protocol."""
        try:
            outputs.arrived(call.id, msg.get("slot"))
            self._judge(call, msg, outputs)
        except OutputError:
            raise  # the candidate's output broke the protocol: the caller says so
        except Exception as e:  # noqa: BLE001 - the trusted side never raises (issue 33)
            self.internal_error(call, e)
        finally:
            outputs.discard(call.id)
            release_reserved(self.device)

    def internal_error(self, call: Call, e: BaseException) -> None:
        """The trusted side's own failure on `call`: category `internal` (infrastructure:
        the loop evaluates the candidate again and never charges it), the verdict one
        sentence, the traceback in this process's log only (never to the candidate)."""
        print(f"kernelloop: the trusted side failed judging call {call.id}:", file=sys.stderr)
        traceback.print_exception(e, limit=12, file=sys.stderr)
        if type(e).__name__ == "OutOfMemoryError":  # torch's, on this side's GPU
            why = trusted_oom(str(e), self.task.spec.task.closed_shapes, retried=False) or ""
        else:
            why = (
                f"the trusted side failed judging this call ({type(e).__name__}; traceback "
                "in the log): not the candidate's fault, it is evaluated again"
            )
        self._fail(call, call.suite, "internal", why)

    def _judge(self, call: Call, msg: dict, outputs: OutputDir) -> None:
        if not msg.get("ok"):
            error = msg.get("error", "")
            if msg.get("compiler"):  # by the exception's class or frame, never its text
                lines = compiler_lines(error) or last_line(error)
                self._fail(call, call.suite, "compile", f"its kernel failed to compile: {lines}")
            elif why := harness_oom(error, self.worker_share_bytes):
                self._fail(call, call.suite, "internal", why)
            else:
                where = candidate_frame(error)  # the kernel's line, for the agent's next try
                self._fail(
                    call, call.suite, "crash", f"the candidate raised {last_line(error)}{where}"
                )
            return
        if call.suite == "e2e":
            self._judge_e2e(call, msg, outputs)
            return
        try:
            self._judge_output(call, msg, outputs)
        except TaskFault as e:
            if why := trusted_oom(str(e), self.task.spec.task.closed_shapes):
                self._fail(call, call.suite, "internal", why)
                return
            self._fail(
                call,
                call.suite,
                "setup",
                f"the task's inputs or reference failed on this call ({e}); the task is at "
                "fault, not the candidate: fix its shapes or reference",
            )

    def _judge_output(self, call: Call, msg: dict, outputs: OutputDir) -> None:
        inputs = self._inputs(call)
        like = self.output_like(call, inputs)
        if not self._interface(call, msg, like, self.output_parts(call, inputs)):
            return
        self._audit(call, msg)
        out = self._staging.load(outputs, call.id, like)
        tol = self.tolerance(call, like)
        refs = self.value_refs(call, inputs)
        if "keep" in refs:  # a call with p > 0, in whichever suite
            trivial = trivial_outputs(inputs, like, refs["keep"], kept=refs["keep"])
        elif "ref" in refs:
            trivial = trivial_outputs(inputs, like, refs["ref"])
        else:
            trivial = self._trivial_parts(call, inputs, refs)
        self._prove(call, trivial, refs, tol)
        if "keep" in refs:
            self._stochastic(call, out, refs, tol, trivial)
            return
        cmp = self._compare(call, out, refs, tol)
        floating = torch.empty(0, dtype=getattr(torch, call.dtype))
        said = self.own_note(call, self.tolerance(call, floating, own=False))  # own_error.py
        if not cmp.passed:
            if not self._stateful(call, out, cmp):  # judge_state.py
                reason = cmp.reason + said
                self._fail_values(call, call.suite, cmp.category, reason, cmp, out, trivial, tol)
            return
        self._remember(call, out)
        if call.suite == "determinism":
            self._determinism(call, out, cmp)
        else:
            self._pass(call, call.suite, cmp, said.strip())

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
        refs_list = [refs["ref"]] if "ref" in refs else parts_of(refs)
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
            for o, r in zip(outs, parts_of(refs), strict=True)
        ]
        for k, c in enumerate(cmps):
            if not c.passed:
                instead = diagnose.swapped(outs, parts_of(refs), k, self._close(call))
                return replace(c, reason=f"output {k}: {c.reason}{instead}")
        used = max((c.tol_used for c in cmps if c.tol_used is not None), default=None)
        return replace(max(cmps, key=lambda c: c.max_abs_err or 0.0), tol_used=used)

    def _trivial_parts(self, call: Call, inputs: dict, refs: dict) -> dict[str, torch.Tensor]:
        """Trivial outputs of a call with several outputs: each output's trivial variants
        (trivial_outputs) with the other outputs exact, packed as the worker packs them —
        so every output is proven checked, not only the first."""
        likes = self.output_parts(call, inputs)
        exact = [r.to(like.dtype).to(self.device) for r, like in zip(parts_of(refs), likes,
                                                                       strict=True)]  # fmt: skip
        out = {}
        for k, like in enumerate(likes):
            for name, t in trivial_outputs(inputs, like, parts_of(refs)[k]).items():
                parts = [*exact[:k], t.to(self.device), *exact[k + 1 :]]
                out[f"output {k}: {name}"] = torch.cat(
                    [p.contiguous().reshape(-1).view(torch.uint8) for p in parts]
                )
        return out

    def tolerance(self, call: Call, like: torch.Tensor, own: bool = True):
        """The call's tolerance: the task's for its dtype (on a generic case with values up
        to S, its absolute part × S: task/generic_cases.py), widened where the task's own
        model misses it on the call's inputs (`model_margin`: own_error.py; own=False: not
        widened); an integer or boolean output is compared exactly (an index one off is a
        wrong index, whatever its size)."""
        if like.is_floating_point() or like.is_complex():
            tol = self.task.spec.tolerances[call.dtype]
            k = atol_factor(call.case, getattr(torch, call.dtype))
            tol = tol if k == 1.0 else tol.model_copy(update={"atol": tol.atol * k})
            return self.own_tolerance(call, tol) if own else tol
        return EXACT

    # ---- trivial outputs -------------------------------------------------------
    def _value_fails(self, call: Call, out: torch.Tensor, refs: dict, tol) -> bool:
        """Would `out` fail this call's own value check (the one the candidate gets)?"""
        return self._value_reason(call, out, refs, tol) is not None

    def _value_reason(self, call: Call, out: torch.Tensor, refs: dict, tol) -> str | None:
        """Why `out` fails the value check against `refs` (tolerance against the float64
        reference; with p > 0, `mask_check`), or None when it passes."""
        if "keep" not in refs:
            cmp = self._compare(call, out, refs, tol)
            return None if cmp.passed else cmp.reason
        problem = self.mask_check(call, out, refs, tol)[1]
        return None if problem is None else problem[1]

    def value_refs(self, call: Call, inputs: dict | None = None) -> dict:
        """The float64 reference(s) of `call`: {"ref"}, or {"keep", "drop"} for a stochastic
        call (every element kept, every element dropped). From the reference cache when
        the judge has one (refcache.py: keyed by everything the reference depends on)."""

        def compute() -> dict:
            try:
                return retry_out_of_memory(refs, self.device)
            except Exception as e:  # noqa: BLE001 - the task's own code, not the candidate's
                raise TaskFault(f"{type(e).__name__}: {str(e)[:200]}") from e

        def refs() -> dict:
            given = self._inputs(call) if inputs is None else inputs
            if call.rate > 0:  # every suite: the op as it is used (issue 33)
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
            call.rate > 0,
        )

    def value_problem(self, call: Call, out: torch.Tensor, refs: dict | None = None) -> str | None:
        """The value check of one output on `call`'s inputs — the same comparison as every
        judged call — without interface facts or proofs (the benchmark's timed outputs)."""
        refs = self.value_refs(call) if refs is None else refs
        return self._value_reason(call, out.to(self.device), refs, self.tolerance(call, out))
