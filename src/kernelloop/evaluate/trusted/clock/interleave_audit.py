"""The interleaved benchmark's audits: the inputs the trusted side hands a worker, and the
check of a timed call's output against its commitment and the float64 reference (a part
of interleave.Session)."""

from __future__ import annotations

import io
import os
import secrets
import statistics
from dataclasses import replace

import torch

from kernelloop.evaluate.commitment import check_digest
from kernelloop.evaluate.protocol import (
    call_seed,
)
from kernelloop.evaluate.trusted.clock import timing_checks as checks
from kernelloop.evaluate.trusted.clock.interleave_types import _one_thread
from kernelloop.evaluate.trusted.launch.workers import file_name
from kernelloop.evaluate.trusted.values.plan import Call

# The trusted side's cached GPU memory kept between audits (more is given back).
KEEP_CACHED_BYTES = 8 << 30


class AuditMixin:
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
        with self.phase("audit"):  # inside "rounds"
            return self._audit_one(call, slot, seed, key, commits, j)

    def _audit_one(
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
        with self.phase("audit_fetch"):  # inside "audit"
            ans = self.turn(slot, "output", 300, file=name, index=j)
            if ans is None:
                return False  # an evidence slot, dropped
            nbytes = like.numel() * like.element_size()
            try:
                data = self._fetch(slot, name, nbytes, ans.body)
            except (OSError, ValueError) as e:
                self.problem(
                    "timing", slot, f"{label}: {slot}'s timed output could not be read ({e})"
                )
                return False
        self.out.phases_s["audits"] = self.out.phases_s.get("audits", 0) + 1
        with _one_thread(self.cuda):
            # A slot's bytes come as this process's own device/host copy, a file's as a buffer.
            if not isinstance(data, torch.Tensor):
                data = torch.frombuffer(data, dtype=torch.uint8)
            out = data.view(like.dtype).reshape(like.shape)
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
            del out
        if self.cuda and torch.cuda.memory_reserved() > KEEP_CACHED_BYTES:
            # The audit's float64 work stays in this process's cache otherwise: memory the
            # timing workers of a large problem need (KernelBench level1/23: 6.4 GB outputs).
            # Below the mark the cache is kept: freeing and allocating again every audit
            # put cudaFree/cudaMalloc into each of the flagship's 21 audits.
            torch.cuda.empty_cache()
        if why is not None:
            self.problem(
                "timing",
                slot,
                f"{label}: the timed output differs from the reference ({slot}: {why})",
            )
            return False
        return True

    def _fetch(self, slot: str, name: str, nbytes: int, body) -> torch.Tensor | bytearray:
        """An audited output's bytes: this process's own copy of the worker's shared slot
        where the answer names one (checked against the slot count and the size this
        process expects), else the output file `name`. Raises ValueError/OSError."""
        if body.slot is None:
            return checks.read_output(self.workers[slot].out_dir / name, nbytes)
        inbox = self.workers[slot].inbox
        if inbox is None or body.slot >= inbox.count:
            raise ValueError(f"its answer names output slot {body.slot}, which it was not given")
        if body.nbytes != nbytes or not 0 < nbytes <= inbox.size:
            inbox.release()
            raise ValueError(f"its output has {body.nbytes} bytes, expected {nbytes}")
        own = inbox.take(body.slot, nbytes)
        ph = self.out.phases_s
        ph["audits_via_slot"] = ph.get("audits_via_slot", 0) + 1
        return own

    def _check_batch(self, label: str, slot: str, ans, probed: bool) -> None:
        if not probed and (ans.body.pre or ans.body.post):
            # Probe times are taken off a batch's wall time: a worker not asked for them
            # (the candidate's) could claim its own time away with them.
            self.problem(
                "protocol",
                slot,
                f"{label}: {slot}'s worker answered a batch with idle probes it was not asked "
                "for (they would be taken off its own time): its numbers are not real",
            )
            ans.body.pre, ans.body.post = [], []
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
