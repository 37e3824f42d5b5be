"""The interleaved benchmark: one sandboxed worker per implementation, one at a time.

Layout (docs/benchmarking.md has the why):
1. every worker starts at once (each pays its own Python + torch import, concurrently);
   none has imported its implementation yet;
2. on a GPU, each non-candidate worker calibrates its idle probe, one at a time — no
   candidate code has run anywhere yet;
3. every worker imports its implementation; from then on, a worker runs only during its
   own turn and is stopped (its whole process tree) otherwise;
4. per shape, with inputs and a stochastic seed drawn fresh from `secrets`: all workers
   build the inputs, make one untimed call and warm up; on a GPU each then measures a
   rough time alone, and the trusted side chooses one method for every slot (per-call
   events, CUDA-graph replay for short kernels, device-wide where work escapes the
   calling stream); then rounds until the shape's budget: in a shuffled order (secret
   RNG) each worker times one batch of the same number of calls, every call on inputs of
   its own from a secret seed sent with the batch, committing to each output inside the
   batch; after some of the candidate's batches (chosen at random once the batch is
   back) the trusted side audits one of its calls: the output must match its commitment
   and the float64 reference for that call's inputs; on a GPU, then run-through rounds
   (trusted/through.py): units back to back with nothing reported but commitments, the
   trusted clock's check on every worker's events; then calibration top-ups and the
   second timer;
5. every worker reports its tripwires (patched harness, stray processes, calls that
   launched nothing) and exits; anything left is killed.
A problem stops the run: the record carries it and the gate rejects.

Evidence slots (`Evidence`: the task's reference under torch.compile, bench.py's
`compiled=True`) are timed in the same rounds, on the same GPU and inputs, but decide
nothing: the method, the batch size, the rounds' budget, the trusted clock's checks and
the run-through rounds are the others' alone, and anything that goes wrong with an
evidence slot (a failed or too long compile, a crash, a failed audit, foreign work in its
turn) drops it with a warning instead of stopping the run.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from kernelloop.evaluate.commitment import check_digest
from kernelloop.evaluate.protocol import (
    GRAPH_BELOW_MS,
    GRAPH_MIN_RATIO,
    aa_slot,
    call_seed,
    escapes,
    gpu_samples,
    graph_plan,
    method_text,
)
from kernelloop.evaluate.trusted import timing_checks as checks
from kernelloop.evaluate.trusted.judge import Judge
from kernelloop.evaluate.trusted.plan import Call
from kernelloop.evaluate.trusted.through import through_rounds
from kernelloop.evaluate.trusted.workers import TimingWorker, WorkerFailed, file_name
from kernelloop.sandbox import SandboxConfig, detect_mode
from kernelloop.task import Shape, Task

_RNG = secrets.SystemRandom()
OVERHEAD_MS = {"cuda": 0.3, "cpu": 0.05}  # harness cost per timed call, for sizing batches
QUIET_PATIENCE = 4.0  # × a shape's time budget, at most, to gather uncontended batches
# An evidence slot is dropped once less than this share of the benchmark's time limit is
# left: the limit is the candidate's, and running into it would fail the candidate.
EVIDENCE_RESERVE = 0.3


@dataclass
class Settings:
    """How much to time. GPU: rounds until the shape's budget (the samples spread over it,
    so a clock transient cannot carry a median), at most `reps` calls per implementation.
    CPU: single-threaded so a shared runner's other load perturbs it less."""

    reps: int = 400
    min_reps: int = 20
    warmup: int = 3
    warmup_s: float = 0.05
    max_s_per_shape: float | None = None  # default: 0.6 s on a GPU, 0.8 s on a CPU
    cpu_reps: int = 200
    cpu_min_reps: int = 15
    cpu_warmup: int = 2
    cpu_threads: int = 1
    batch_s: float | None = None  # target length of one batch (default 10 ms GPU, 20 ms CPU)
    graphs: bool = True
    ramp_s: float = 0.2  # GPU held busy before the first shape: clocks leave idle
    batch_ramp_ms: float = (
        0.3  # and briefly before each batch (a turn change leaves it idle ~1-3 ms)
    )
    profile: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Evidence:
    """A slot timed for the record only (bench.py: the reference under torch.compile).
    `job`: what its worker's job adds (the entry, the `compile` spec); `budget_s`: the
    most its `prepare` (the first call, which compiles, and the warm-up) may take on one
    shape, `total_s` on all shapes together — past either it is dropped, never waited for."""

    job: dict
    budget_s: float = 120.0
    total_s: float = 240.0


@dataclass
class Problem:
    category: str  # timing | tamper | protocol | compile | crash | timeout
    slot: str  # whose doing: interference is the candidate's, a wrong output its producer's
    text: str


@dataclass
class SlotResult:
    samples_ms: list[float]
    method: str
    hidden_calls: int
    total_ms: float
    profiler_ms: float | None = None
    round_size: int = 1  # timed units per round (the batch size)
    per_unit: int = 1  # calls per timed unit (graph replays)


@dataclass
class Outcome:
    env: dict = field(default_factory=dict)  # a non-candidate worker's hello: device, versions
    mode: str = "not run"
    shapes: dict[str, dict[str, SlotResult]] = field(default_factory=dict)
    reported_s: dict[str, float] = field(default_factory=dict)
    observed_s: dict[str, float] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    log_tail: str = ""
    timing_phase_s: float | None = None
    idle: dict = field(default_factory=dict)  # idle-probe calibrations and worst probes (GPU)
    stray_killed: int = 0
    # Evidence slots: why each one dropped out; per shape, how long its `prepare` (the
    # first call, which compiles, and the warm-up) took on the trusted clock.
    dropped: dict[str, str] = field(default_factory=dict)
    prepare_s: dict[str, dict[str, float]] = field(default_factory=dict)


class _Abort(Exception):
    pass


class Session:
    def __init__(
        self,
        task: Task,
        slots: dict[str, Path],
        shapes: list[Shape],
        dtype: str,
        device: str,
        settings: Settings,
        sandbox: str,
        timeout_s: float,
        say: Callable[[str], None],
        candidate: str,
        reference: str,
        gpu: int | None = None,
        evidence: dict[str, Evidence] | None = None,
    ) -> None:
        self.gpu = gpu  # nvidia-smi's index of the GPU every worker is bound to (None: 0)
        self.task, self.slot_files, self.shapes, self.dtype, self.device = (
            task,
            slots,
            shapes,
            dtype,
            device,
        )
        self.s, self.say, self.candidate, self.reference = settings, say, candidate, reference
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.sandbox = sandbox
        self.cuda = device == "cuda"
        self.interp = device == "cpu" and task.spec.task.language == "triton"
        self.out = Outcome()
        self.workers: dict[str, TimingWorker] = {}
        self.cal: dict[str, dict[str, float]] = {}
        self.judge: Judge | None = None
        self.like: torch.Tensor | None = None  # the current shape's output, as shape and dtype only
        self._audits: dict[tuple[str, str], int] = {}  # (shape, slot) -> audits so far
        self.evidence = {s: e for s, e in (evidence or {}).items() if s in slots}
        self._gone: dict[str, TimingWorker] = {}  # dropped evidence slots' workers
        self._prepare_spent = 0.0  # evidence slots' `prepare` time so far (the compile budget)

    # ---- helpers ------------------------------------------------------------------
    def left(self, cap: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WorkerFailed(
                self.candidate, "timeout", f"the benchmark exceeded its {self.timeout_s:g} s limit"
            )
        return min(cap, left)

    def problem(self, category: str, slot: str, text: str) -> None:
        """A problem stops the run; one of an evidence slot's drops that slot instead."""
        if slot in self.evidence:
            self.drop(slot, text)
            return
        self.out.problems.append(Problem(category, slot, text))

    def core(self) -> list[str]:
        """The slots the gate reads (every slot but the evidence slots), in start order."""
        return [s for s in self.workers if s not in self.evidence]

    def drop(self, slot: str, why: str) -> None:
        """Stop timing evidence slot `slot` (its worker is killed): shapes it finished keep
        their numbers, the rest of the run goes on without it."""
        w = self.workers.pop(slot, None)
        if w is None:
            return
        self._gone[slot] = w
        if not w.dead:
            w.kill()
        self.out.dropped[slot] = why
        self.out.warnings.append(f"{slot} slot dropped (evidence only, never the gate's): {why}")

    def turn(self, slot: str, cmd: str, cap: float = 120.0, **args):
        """One command to one worker, alone: resumed for it, stopped again after. An
        evidence slot that fails (or would cut into the time the others need) is dropped
        and the answer is None."""
        w = self.workers[slot]
        if slot in self.evidence:
            if self.deadline - time.monotonic() < EVIDENCE_RESERVE * self.timeout_s:
                self.drop(slot, f"the benchmark's {self.timeout_s:g} s limit was near")
                return None
            try:
                return self._turn(w, cmd, cap, args)
            except WorkerFailed as e:
                self.drop(slot, f"{cmd}: {e}")
                return None
        return self._turn(w, cmd, cap, args)

    def _turn(self, w: TimingWorker, cmd: str, cap: float, args: dict):
        before = w.freezer.waited_ns()
        w.resume()
        try:
            ans = w.ask(cmd, self.left(cap), **args)
        finally:
            if not w.dead:
                w.pause()
        ans.waited_s = max(0, w.freezer.waited_ns() - before) / 1e9
        return ans

    def all_at_once(
        self,
        cmd: str,
        cap: float,
        per_slot: Callable[[str], dict] | None = None,
        caps: dict[str, float] | None = None,
        doing: str = "",
    ) -> dict:
        """The same command to every worker concurrently (untimed work: imports, warm-up).
        `caps`: a slot's own time limit (from when its command was sent); an evidence slot
        that fails or runs past it is dropped (`doing` says what it was doing)."""
        for w in self.workers.values():
            w.resume()
        answers, sent = {}, {}
        try:
            for slot, w in list(self.workers.items()):
                try:
                    sent[slot] = w.send(cmd, **(per_slot(slot) if per_slot else {}))
                except WorkerFailed as e:
                    if slot not in self.evidence:
                        raise
                    self.drop(slot, f"{doing or cmd}: {e}")
            for slot, w in list(self.workers.items()):
                own = (caps or {}).get(slot, cap)
                try:
                    answers[slot] = w.collect(
                        cmd, sent[slot], self.left(own - (time.monotonic() - sent[slot]))
                    )
                except WorkerFailed as e:
                    if slot not in self.evidence:
                        raise
                    self.drop(slot, f"{doing or cmd}: {e}")
        finally:
            for w in self.workers.values():
                if not w.dead:
                    w.pause()
        return answers

    # ---- the run ------------------------------------------------------------------
    def run(self) -> Outcome:
        from kernelloop.evaluate.trusted.run import _scratch_root

        root = Path(tempfile.mkdtemp(prefix="kernelloop-bench-", dir=_scratch_root()))
        try:
            self._start(root)
            self._prologue()
            t_phase = time.monotonic()
            for k, shape in enumerate(self.shapes):
                self._shape(k, shape)
            self.out.timing_phase_s = round(time.monotonic() - t_phase, 3)
            self._stop()
        except WorkerFailed as e:
            self.problem(e.category, e.slot, str(e))
        except _Abort:
            pass
        finally:
            self._finish_all()
            shutil.rmtree(root, ignore_errors=True)
        return self.out

    def _start(self, root: Path) -> None:
        task = self.task
        inputs_file, inputs_func = task.file_and_function("inputs")
        mode = detect_mode(self.sandbox)
        job = {
            "device": self.device,
            "entry": task.spec.task.entry,
            "model_class": task.model_class(),
            "inputs_file": str(inputs_file),
            "inputs_func": inputs_func,
            "params": dict(task.spec.params),
            "language": task.spec.task.language,
            "private_pid_namespace": mode in ("bwrap", "unshare"),
            "cpu_threads": self.s.cpu_threads,
        }
        cfg = SandboxConfig(
            mode=mode,
            timeout_s=self.timeout_s,
            gpu=self.cuda,
            gpu_index=self.gpu,
            ro_paths=[task.folder, Path(__file__).resolve().parents[3]],
            hidden_paths=[task.workspace()],
            extra_env={"TRITON_INTERPRET": "1"} if self.interp else {},
        )
        key = secrets.token_hex(16)
        audit = task.spec.task.language == "triton"
        for i, (slot, path) in enumerate(self.slot_files.items()):
            self.workers[slot] = TimingWorker(
                slot,
                path,
                {
                    **job,
                    "audit": audit and slot == self.candidate,
                    "describe": slot == self.reference,
                    **(self.evidence[slot].job if slot in self.evidence else {}),
                },
                root / f"{i}-{file_name(slot)}",
                replace(cfg),
                key,
            )
        self.out.mode = self.workers[self.candidate].sp.mode
        if self.out.mode == "none":
            self.out.warnings.append("NO SANDBOX: the timed code ran as plain processes.")
        for slot, w in list(self.workers.items()):
            try:
                env = w.hello(self.left(300))
            except WorkerFailed as e:
                if slot not in self.evidence:
                    raise
                self.drop(slot, f"its worker did not start: {e}")
                continue
            if slot == self.reference:
                self.out.env = env

    def _prologue(self) -> None:
        # Idle-probe calibrations, one worker at a time, before any implementation is imported.
        if self.cuda:
            for slot, w in list(self.workers.items()):
                if (
                    slot != self.candidate
                ):  # the GPU's clocks leave idle first (the first worker ramps longer)
                    try:
                        ans = w.ask(
                            "calibrate", self.left(120), n=30, ramp_s=0.02 if self.cal else 0.1
                        )
                    except WorkerFailed as e:
                        if slot not in self.evidence:
                            raise
                        self.drop(slot, f"calibrating its idle probe: {e}")
                        continue
                    self.cal[slot] = checks.calibration(ans.body.probes)
            self.out.idle = {"calibration": self.cal, "worst_host_ms": {}}
        self.say(
            f"importing {len(self.workers)} implementation(s), one worker each "
            f"(sandbox={self.out.mode})"
        )
        answers = self.all_at_once("load", 600, doing="importing")
        for slot, ans in answers.items():
            if ans.body.tampered:
                self.problem(
                    "tamper",
                    slot,
                    f"{slot} replaced harness functions ({', '.join(ans.body.tampered[:5])}) "
                    f"during import",
                )
        self.judge = Judge(self.task, self.device)

    def _shape(self, k: int, shape: Shape) -> None:
        label, cuda = shape.label, self.cuda
        st = self.task.spec.stochastic
        seed = secrets.randbits(31)
        params = {st.seed_param: secrets.randbits(31)} if st else {}
        settings = {
            "warmup": self.s.warmup,
            "warmup_s": self.s.warmup_s,
            "cpu_warmup": self.s.cpu_warmup,
        }
        rate = float(self.task.spec.params.get(st.rate_param, 0.0)) if st else 0.0
        call = Call(
            id=f"timing-{label}",
            suite="stochastic" if rate > 0 else "random",
            case="random",
            shape=shape,
            dtype=self.dtype,
            input_seed=seed,
            params=params,
            rate=rate,
        )
        like = self.judge.output_like(call)
        self.like = torch.empty(
            like.shape, dtype=like.dtype, device="meta"
        )  # what every output must look like
        del like
        self.say(f"{label}: preparing {len(self.workers)} worker(s)")
        caps = self._prepare_caps(label)
        prep = self.all_at_once(
            "prepare",
            600,
            lambda slot: {
                "dims": shape.dims,
                "dtype": self.dtype,
                "input_seed": seed,
                "params": params,
                "settings": settings,
                "ramp_s": self.s.ramp_s if (cuda and k == 0 and slot == self.reference) else 0.0,
            },
            caps=caps,
            doing=f"{label}: its first call (torch.compile) and warm-up, "
            f"within a {min(caps.values(), default=0):.0f} s budget",
        )
        for slot in self.evidence:
            if slot in prep:  # the compile and warm-up: recorded, never timed
                took = prep[slot].wall_s
                self._prepare_spent += took
                self.out.prepare_s.setdefault(slot, {})[label] = round(took, 3)
        rough = {}
        for s in list(self.workers):  # each alone: the warm-ups overlapped
            if (ans := self.turn(s, "rough")) is not None:
                rough[s] = ans.body.ms
        method = self._choose_method(rough, prep[self.reference].body) if cuda else "cpu"
        accs = self._rounds(call, rough, method)
        if method.startswith("graph:") and not self.out.problems:
            res = self._results(accs, method)
            lost = [
                s for s in res if statistics.median(res[s].samples_ms) < GRAPH_MIN_RATIO * rough[s]
            ]
            for s in [s for s in lost if s in self.evidence]:
                self.drop(s, f"{label}: a graph replay ran far faster than its call alone")
            if any(s not in self.evidence for s in lost):
                # A replay far faster than the same call timed alone lost work at capture.
                method = "events"
                self._set_method(method)
                accs = self._rounds(call, rough, method)
        if cuda:
            for s in list(self.workers):
                if (ans := self.turn(s, "end")) is not None:
                    accs[s].cals += ans.body.cals
        res = self._results(accs, method)
        for s in self.s.profile:
            if s in self.workers:
                res[s].profiler_ms = self.turn(s, "profile", 300).body.ms
        self._check_shape(call, accs, res)
        res = {s: r for s, r in res.items() if s in self.workers}  # a slot dropped meanwhile
        self.out.shapes[label] = res
        accs = {s: a for s, a in accs.items() if s in res}
        self.out.reported_s[label] = round(sum(a.reported_ms() for a in accs.values()) / 1e3, 4)
        self.out.observed_s[label] = round(sum(a.wall_s for a in accs.values()), 4)
        if self.out.problems:
            raise _Abort

    def _prepare_caps(self, label: str) -> dict[str, float]:
        """Each evidence slot's time limit for this shape's `prepare` (its first call
        compiles): its per-shape budget, at most what is left of its total and never into
        the benchmark's reserve (EVIDENCE_RESERVE of its limit, the others' time); a slot
        with nothing left is dropped here."""
        caps = {}
        reserve = self.deadline - time.monotonic() - EVIDENCE_RESERVE * self.timeout_s
        for slot, ev in self.evidence.items():
            if slot not in self.workers:
                continue
            left = min(ev.budget_s, ev.total_s - self._prepare_spent, reserve)
            if left < 1.0:
                self.drop(
                    slot,
                    f"{label}: no time left to compile (its budget: {ev.total_s:g} s for all "
                    f"shapes, and {1 - EVIDENCE_RESERVE:.0%} of the benchmark's "
                    f"{self.timeout_s:g} s limit)",
                )
                continue
            caps[slot] = left
        return caps

    def _choose_method(self, rough: dict[str, float], ref_prep) -> str:
        """One method for every slot of the shape, decided here from every worker's probe."""
        core = self.core()  # an evidence slot follows the others' method, never decides it
        small = self.s.graphs and min(rough[s] for s in core) < GRAPH_BELOW_MS
        if small and any(
            escapes(a.body.calls, a.body.cals)
            for a in (self.turn(s, "probe", rough_ms=rough[s]) for s in core)
        ):
            self._set_method("device-wide")
            return "device-wide"
        if small:
            sets, n_calls = graph_plan(ref_prep.input_bytes, ref_prep.l2_bytes)
            # A slot that cannot be captured sends every slot back to per-call events.
            return (
                f"graph:{n_calls}"
                if self._set_method("graph", sets=sets, n_calls=n_calls)
                else "events"
            )
        self._set_method("events")
        return "events"

    def _set_method(self, kind: str, **args) -> bool:
        ok = True
        for s in list(self.workers):
            ans = self.turn(s, "method", 300, kind=kind, **args)
            if ans is None:
                continue
            if s in self.evidence:  # the others' method stands; an evidence slot follows or goes
                if not ans.body.ok:
                    self.drop(s, f"it could not be set to {kind} ({ans.body.error})")
                continue
            ok = ans.body.ok and ok
        if (
            not ok
        ):  # a candidate that cannot be captured: every slot per call, so they stay comparable
            for s in list(self.workers):
                self.turn(s, "method", 300, kind="events")
        return ok

    def _rounds(self, call: Call, rough: dict[str, float], method: str) -> dict[str, checks.Acc]:
        cuda, s, label = self.cuda, self.s, call.shape.label
        reps = s.reps if cuda else s.cpu_reps
        min_reps = min(reps, s.min_reps if cuda else s.cpu_min_reps)
        budget = s.max_s_per_shape or (0.6 if cuda else 0.8)
        # Batches, rounds and budget are sized by the slots the gate reads: an evidence
        # slot times the same batches beside them and its turns do not count as spent.
        core = self.core()
        units = int(method.split(":")[1]) if method.startswith("graph:") else 1
        per_call = max(rough[c] for c in core) * units + OVERHEAD_MS[self.device]
        out_bytes = max(1, self.like.numel() * self.like.element_size())
        by_time = round((s.batch_s or (0.01 if cuda else 0.02)) * 1e3 / per_call)
        # every output of a batch is kept until its audit: the batch fits RETAIN_BYTES
        m = max(1, min(by_time, max(1, reps // 5), 1000, checks.RETAIN_BYTES // out_bytes))
        cal_every = 2 * len(core)  # one calibration every 2 rounds, per slot
        per_round_ms = len(core) * m * per_call
        batches = min(reps / m, max(min_reps / m, budget * 1e3 / per_round_ms))
        want, chance = checks.audit_chance(out_bytes, batches)
        audited = {self.candidate, aa_slot(self.candidate)} & set(self.workers)
        accs = {slot: checks.Acc() for slot in self.workers}
        last: dict[str, tuple[int, int, list[str]]] = {}
        n_done, t_begin, gen_s, failed = 0, time.monotonic(), 0.0, False
        evidence_s = 0.0  # time in evidence slots' turns: not the others' budget
        known = len(self.out.problems)

        def more() -> bool:
            spent = time.monotonic() - t_begin - gen_s - evidence_s
            if n_done < reps and (n_done < min_reps or spent < budget):
                return True
            # Batches in which a worker waited for a CPU do not count for the trusted
            # clock's check: on a busy machine, measure on (a while) until enough do.
            short = any(
                a.calls and len(a.batches) < checks.QUIET_MIN
                for slot, a in accs.items()
                if slot not in self.evidence
            )
            return short and not self.interp and spent < QUIET_PATIENCE * budget

        while more():
            n = min(m, reps - n_done) if n_done < reps else m
            order = list(self.workers)
            _RNG.shuffle(order)
            seed, t_gen = secrets.randbits(31), time.monotonic()
            sets = None if cuda else self._input_sets(call, seed, n)
            gen_s += time.monotonic() - t_gen
            for slot in order:
                if slot not in self.workers:
                    continue  # an evidence slot dropped meanwhile
                key = secrets.randbits(62)
                own = max(per_call, rough.get(slot, 0.0) * units + OVERHEAD_MS[self.device])
                t_turn = time.monotonic()
                ans = self.turn(
                    slot,
                    "batch",
                    max(30.0, 50 * n * own / 1e3),
                    n=n,
                    seed=seed,
                    key=key,
                    inputs=None if sets is None else self._hand_over(slot, sets),
                    cal_every=cal_every,
                    probe=cuda and slot != self.candidate,
                    ramp_ms=s.batch_ramp_ms if cuda else 0.0,
                )
                if slot in self.evidence:
                    evidence_s += time.monotonic() - t_turn
                if ans is None:
                    continue  # the evidence slot was dropped
                accs[slot].add(ans)
                self._check_batch(label, slot, ans)
                if len(ans.body.commits) != len(ans.body.calls):
                    self.problem(
                        "protocol",
                        slot,
                        f"{label}: {slot}'s worker committed to {len(ans.body.commits)} outputs "
                        f"for a batch of {len(ans.body.calls)} timed calls",
                    )
                if len(self.out.problems) > known:
                    # a lying clock, a patched harness or foreign GPU work: no point going on
                    raise _Abort
                if slot not in self.workers:
                    continue  # the evidence slot was dropped by a check
                last[slot] = (seed, key, ans.body.commits)
                if (
                    not failed
                    and slot in audited
                    and self._n_audits(label, slot) < want
                    and _RNG.random() < chance
                ):
                    j = _RNG.randrange(len(ans.body.commits))
                    failed = not self._audit(call, slot, *last[slot], j)
                    known = len(self.out.problems)
            n_done += n
            if failed:  # the round is complete (every slot has samples to show); no more
                return accs
        for slot in sorted(audited):  # too few picked at random: the last batch makes up the rest
            picks = _RNG.sample(range(len(last[slot][2])), len(last[slot][2]))
            while self._n_audits(label, slot) < checks.MIN_AUDITS and picks:
                if not self._audit(call, slot, *last[slot], picks.pop()):
                    return accs
        for slot in [e for e in self.evidence if e in self.workers and e in last]:
            # One timed output per shape against the reference: a failure drops the slot.
            self._audit(call, slot, *last[slot], _RNG.randrange(len(last[slot][2])))
        if cuda:  # what the trusted clock holds the events to (trusted/through.py)
            core_accs = {c: a for c, a in accs.items() if c not in self.evidence}
            through_rounds(self, call, m, per_call, audited, core_accs)
        return accs

    def _input_sets(self, call: Call, seed: int, n: int) -> bytes:
        """On a CPU the trusted side makes a batch's inputs itself (the task's generator,
        one set per timed call) and hands them over as a file: making them in the worker
        would put milliseconds of generation per call on the trusted clock, noise a lying
        worker could hide in. A worker sees them only in its own turn (it is stopped
        otherwise), so it cannot compute ahead."""
        with _one_thread(False):
            sets = [
                self.judge._inputs(replace(call, input_seed=call_seed(seed, j))) for j in range(n)
            ]  # noqa: SLF001
            buf = io.BytesIO()
            torch.save(sets, buf)
        return buf.getvalue()

    def _hand_over(self, slot: str, data: bytes) -> str:
        """Write the batch's inputs into `slot`'s folder under a fresh secret name, never
        following a link the worker planted (the folder is the worker's to write)."""
        name = f"inputs-{secrets.token_hex(8)}.pt"
        dfd = os.open(self.workers[slot].dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            fd = os.open(
                name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dfd
            )
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        finally:
            os.close(dfd)
        return name

    def _n_audits(self, label: str, slot: str) -> int:
        return self._audits.get((label, slot), 0)

    def _audit(
        self, call: Call, slot: str, seed: int, key: int, commits: list[str], j: int
    ) -> bool:
        """One timed call of `slot`'s last batch, picked after the batch came back: its
        output must be the one it committed to inside the batch, and correct for that
        call's inputs against the float64 reference. False (with the problem recorded) when
        it fails: the rounds stop, the shape's timings are still recorded for the reader."""
        label, like = call.shape.label, self.like
        k = self._n_audits(label, slot)
        self._audits[(label, slot)] = k + 1
        name = f"{file_name(slot)}-{label}-{k}.bin"
        if not commits[j]:
            self.problem("timing", slot, f"{label}: {slot}'s timed call returned no tensor")
            return False
        if self.turn(slot, "output", 300, file=name, index=j) is None:
            return False  # an evidence slot, dropped
        nbytes = like.numel() * like.element_size()
        try:
            data = checks.read_output(self.workers[slot].out_dir / name, nbytes)
        except (OSError, ValueError) as e:
            self.problem("timing", slot, f"{label}: {slot}'s timed output could not be read ({e})")
            return False
        with _one_thread(self.cuda):
            out = (
                torch.frombuffer(bytearray(data), dtype=torch.uint8)
                .view(like.dtype)
                .reshape(like.shape)
            )
            del data
            if check_digest(out, key, self.device) != commits[j]:
                self.problem(
                    "timing",
                    slot,
                    f"{label}: the output {slot} showed for an audited timed call is not the one "
                    f"it committed to right after that call: it did not compute that call "
                    f"while timed",
                )
                return False
            audited = replace(call, input_seed=call_seed(seed, j))
            why = self.judge.value_problem(audited, out)
        if why is not None:
            self.problem(
                "timing",
                slot,
                f"{label}: the timed output differs from the reference ({slot}: {why})",
            )
            return False
        return True

    def _check_batch(self, label: str, slot: str, ans) -> None:
        if (bad := checks.batch_clock_problem(label, slot, ans)) is not None:
            self.problem("timing", slot, bad)
        if ans.body.tampered:
            self.problem(
                "tamper",
                slot,
                f"{slot} replaced harness functions ({', '.join(ans.body.tampered[:5])}) "
                f"during timing",
            )
        if (
            slot in self.cal
            and (bad := checks.interference_problem(label, slot, ans, self.cal[slot])) is not None
        ):
            if (
                slot in self.evidence
            ):  # its numbers are suspect; the gate's slots judge the candidate
                self.drop(slot, bad)
            else:
                self.problem("timing", self.candidate, bad)
        if slot in self.cal:
            worst = self.out.idle["worst_host_ms"]
            for tries in (ans.body.pre, ans.body.post):
                if tries:
                    worst[slot] = max(
                        worst.get(slot, 0.0), statistics.median(h for h, _ in tries[-1])
                    )

    def _results(self, accs: dict[str, checks.Acc], method: str) -> dict[str, SlotResult]:
        text = method_text(method, self.interp, self.s.cpu_threads)
        per = int(method.split(":")[1]) if method.startswith("graph:") else 1
        out = {}
        for slot, a in accs.items():
            if slot not in self.workers or not a.calls:
                continue  # an evidence slot dropped on the way
            if self.cuda:
                samples, hidden, total = gpu_samples(
                    [(c[0], c[-1]) for c in a.calls], a.cals, per, method == "device-wide"
                )
            else:
                samples, hidden, total = [c[0] for c in a.calls], 0, sum(c[0] for c in a.calls)
            size = round(len(a.calls) / len(a.batches)) if a.batches else 1
            out[slot] = SlotResult(
                samples, text, hidden, total, round_size=max(1, size), per_unit=per
            )
        return out

    def _check_shape(
        self, call: Call, accs: dict[str, checks.Acc], res: dict[str, SlotResult]
    ) -> None:
        label = call.shape.label
        for slot, a in accs.items():
            if a.no_launch:
                self.problem(
                    "timing",
                    slot,
                    f"{a.no_launch} of {len(a.calls)} timed calls launched none of the "
                    f"candidate's kernels (a replayed or skipped result while timed)",
                )
        if self.out.problems:  # already refused (a failed audit ends the rounds early)
            return
        # The trusted clock holds the candidate to the gate's slots alone.
        accs = {s: a for s, a in accs.items() if s not in self.evidence}
        res = {s: r for s, r in res.items() if s not in self.evidence}
        if not self.interp and (busy := checks.busy_problem(label, accs, self.candidate)):
            self.problem("timing", self.candidate, busy)
            return
        added, bad = checks.saving_check(label, accs, self.candidate, self.device)
        if bad is None and self.cuda:
            claimed = {
                s: statistics.median(r.samples_ms) * r.per_unit
                for s, r in res.items()
                if r.samples_ms
            }
            through, why = checks.through_check(label, accs, claimed, self.candidate)
            added, bad = max(added, through), why  # one excess seen two ways: added once
        if bad is not None:
            self.problem("timing", self.candidate, bad)
        elif added > 0:
            r = res[self.candidate]
            r.samples_ms = [x + added / r.per_unit for x in r.samples_ms]
            self.out.warnings.append(
                f"{label}: the candidate's batches took {added:.4f} ms per call longer than its "
                f"reported calls account for (beyond the others'); its samples were raised by "
                f"that much, to what the trusted clock saw"
            )

    def _stop(self) -> None:
        for slot, w in list(self.workers.items()):
            w.resume()
            try:
                b = w.ask("stop", self.left(60)).body
            except WorkerFailed as e:
                if slot not in self.evidence:
                    raise
                self.drop(slot, f"at the end: {e}")  # the shapes it timed stand
                continue
            if b.tampered:
                self.problem(
                    "tamper",
                    slot,
                    f"{slot} replaced harness functions ({', '.join(b.tampered[:5])}) "
                    f"during timing",
                )
            if b.stray_count:
                self.problem(
                    "tamper",
                    slot,
                    f"{slot} left {b.stray_count} process(es) running at the end (killed), "
                    f"e.g. {b.strays[0] if b.strays else '?'}",
                )
            if b.without_launch:
                self.problem(
                    "timing",
                    slot,
                    f"{b.without_launch} of {b.audit_calls} timed calls launched none of "
                    f"the candidate's kernels (a replayed or skipped result while timed)",
                )

    def _finish_all(self) -> None:
        for slot, w in [*self.workers.items(), *self._gone.items()]:
            if self.out.problems and not w.dead and w.result is None:
                w.kill()
            res = w.finish()
            if slot in self.evidence:  # never a problem; a warning if it ran out of time
                if res.timed_out and slot not in self.out.dropped:
                    self.out.dropped[slot] = f"its worker exceeded its {self.timeout_s:g} s limit"
                    self.out.warnings.append(f"{slot} slot: {self.out.dropped[slot]}")
                continue
            if slot == self.candidate:
                self.out.log_tail = res.stderr.decode(errors="replace")[-3000:]
            self.out.stray_killed += res.stray_killed if slot == self.candidate else 0
            if res.timed_out and not self.out.problems:
                self.problem(
                    "timeout",
                    slot,
                    f"{slot}'s worker exceeded its {self.timeout_s:g} s limit and was killed",
                )


@contextlib.contextmanager
def _one_thread(cuda: bool):
    """CPU checks in this process on one thread: with the workers' load on a small machine,
    torch's intra-op threads spin (a 256x1024 comparison took 0.5 s on 2 threads, 0.02 s on 1)."""
    before = torch.get_num_threads()
    if not cuda:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if not cuda:
            torch.set_num_threads(before)


def run_timing(
    task: Task,
    slots: dict[str, Path],
    shapes: list[Shape],
    dtype: str,
    device: str,
    *,
    settings: Settings,
    sandbox: str = "auto",
    timeout_s: float = 600.0,
    say: Callable[[str], None] | None = None,
    candidate: str = "candidate",
    reference: str = "baseline",
    gpu: int | None = None,
    evidence: dict[str, Evidence] | None = None,
) -> Outcome:
    """Time `slots` ({slot name: implementation file}) interleaved, one worker each, all
    on GPU `gpu` (nvidia-smi's index; None: GPU 0), so no speed is compared across GPUs.
    `evidence`: slots of `slots` timed for the record only (see `Evidence`)."""
    session = Session(
        task,
        slots,
        shapes,
        dtype,
        device,
        settings,
        sandbox,
        timeout_s,
        say or (lambda _m: None),
        candidate,
        reference,
        gpu,
        evidence,
    )
    return session.run()
