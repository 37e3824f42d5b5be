"""Starting and ending the benchmark's workers (a part of interleave.Session): one
sandboxed worker per implementation spawned with its job, their hellos, the GPU's
idle-probe calibrations before any implementation is imported, the imports, and at the
end each worker's tripwires (patched harness, stray processes, calls that launched
nothing) and its exit."""

from __future__ import annotations

import secrets
from dataclasses import replace
from pathlib import Path

from kernelloop.evaluate.protocol import aa_slot
from kernelloop.evaluate.trusted.channel.inbox import Inbox
from kernelloop.evaluate.trusted.channel.outputs import output_file_limit
from kernelloop.evaluate.trusted.clock import timing_checks as checks
from kernelloop.evaluate.trusted.launch.prestart import SOURCE_ROOT
from kernelloop.evaluate.trusted.launch.workers import TimingWorker, WorkerFailed
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.sandbox import SandboxConfig, detect_mode


class LifecycleMixin:
    def _spawn(self, root: Path) -> None:
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
            "tf32": task.spec.precision.tf32,  # the precision contract (torch_precision.py)
            "language": task.spec.task.language,
            "private_pid_namespace": mode in ("bwrap", "unshare"),
            "cpu_threads": self.s.cpu_threads,
        }
        cfg = SandboxConfig(
            mode=mode,
            timeout_s=self.timeout_s + self.head_s,
            gpu=self.cuda,
            gpu_index=self.gpu,
            ro_paths=[task.folder, SOURCE_ROOT],
            hidden_paths=[task.workspace()],
            extra_env={"TRITON_INTERPRET": "1"} if self.interp else {},
            max_file_bytes=output_file_limit(self.device),
        )
        key = secrets.token_hex(16)
        audit = task.spec.task.language == "triton"
        # The slots whose timed outputs are audited show them through a shared output slot
        # (one: an audit is read before the next is asked for); on the H200 the output
        # files cost ~0.2 s per audit, 4.2 of the flagship benchmark's 12 s (2026-12-02).
        shown = {self.candidate, aa_slot(self.candidate), *self.evidence}
        for i, (slot, path) in enumerate(self.slot_files.items()):
            inbox = Inbox.create(self.device, count=1) if slot in shown else None
            self.workers[slot] = TimingWorker(
                slot,
                path,
                {
                    **job,
                    "audit": audit and slot == self.candidate,
                    "describe": slot == self.reference,
                    **(self.evidence[slot].job if slot in self.evidence else {}),
                },
                root / f"w{i}",  # no slot name in an implementation's path (issue 45)
                replace(cfg),
                key,
                inbox,
            )
        self.out.mode = self.workers[self.candidate].sp.mode

    def _hellos(self) -> None:
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
            with self.phase("calibrate"):
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
        with self.phase("load"):
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
