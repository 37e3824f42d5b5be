"""Shared output slots (issue 13, trusted/channel/inbox.py and worker/outbox.py) with real
sandboxed worker processes: outputs reach the trusted side through the slots in turn and
only as fast as it hands slots back, a hostile worker can neither shrink nor grow the
buffer under the trusted side nor change the copy it judges, an evaluation sends its
outputs through slots (no output file), and on a GPU the same holds for device memory
exported through the CUDA driver."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import torch

from kernelloop.evaluate.trusted.channel import inbox as inbox_mod
from kernelloop.evaluate.trusted.channel import outputs as outputs_mod
from kernelloop.evaluate.trusted.channel.inbox import Inbox
from kernelloop.evaluate.trusted.channel.outputs import OutputDir, OutputError
from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.sandbox import SandboxConfig, SandboxProcess, detect_mode
from kernelloop.task import load_task

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src"

# A worker that fills slots in turn with the byte (k + 1) for its k-th output, reporting
# each slot on stdout; with HOSTILE it first tries to shrink and grow the memfd through
# /proc (its own descriptor is closed by then) and keeps the mapping to scribble on later.
WORKER = r"""
import json, os, sys, time
import torch
from kernelloop.evaluate.worker.outbox import Outbox
job = json.loads(sys.stdin.read())
box = Outbox(job["slots"])
device = job["device"]
for k in range(job["n"]):
    flat = torch.full((job["nbytes"],), k + 1, dtype=torch.uint8, device=device)
    t = time.monotonic()
    slot = box.put(flat, timeout_s=30)
    if device == "cuda":
        torch.cuda.synchronize()
    print(json.dumps({"k": k, "slot": slot, "waited": time.monotonic() - t}), flush=True)
if job.get("scribble"):
    box._credit(30)  # the spare slot
    box._credit(30)  # the one the trusted side hands back once it has copied its output
    box.buf.fill_(0xEE)
    if device == "cuda":
        torch.cuda.synchronize()
    print(json.dumps({"scribbled": True}), flush=True)
    time.sleep(2)
"""

HOSTILE_FD = r"""
import json, os, sys
spec = json.loads(sys.stdin.read())["slots"]
fd = spec["fd"]
tried = {}
for name, size in (("shrink", 0), ("grow", spec["count"] * spec["bytes"] + 4096)):
    try:
        os.ftruncate(fd, size)
        tried[name] = "done"
    except OSError as e:
        tried[name] = e.strerror
try:
    import fcntl
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 0)
except OSError as e:
    tried["seal"] = e.strerror
print(json.dumps(tried), flush=True)
"""


def _spawn(code: str, tmp_path: Path, box: Inbox, job: dict) -> SandboxProcess:
    cfg = SandboxConfig(
        mode=detect_mode("auto"),
        timeout_s=120.0,
        gpu=job["device"] == "cuda",
        rw_paths=[tmp_path],
        ro_paths=[PACKAGE],
    )
    proc = SandboxProcess(
        [sys.executable, "-c", code],
        tmp_path,
        cfg,
        json.dumps({**job, "slots": box.job()}).encode(),
        keep_fds=tuple(box.child_fds()),
    )
    box.started()
    return proc


def _round_trip(tmp_path: Path, device: str) -> None:
    box = Inbox.create(device)
    assert box is not None and box.count == 2
    nbytes = 3 << 20
    proc = _spawn(WORKER, tmp_path, box, {"device": device, "n": 5, "nbytes": nbytes})
    try:
        lines = proc.lines()
        seen = []
        for k in range(5):
            msg = json.loads(next(lines))
            assert msg["k"] == k and msg["slot"] == k % 2
            seen.append(msg)
            if k == 0:
                time.sleep(1.0)  # hold both slots: the third output must wait for us
            own = box.take(msg["slot"], nbytes)
            assert own.device.type == device
            assert bool((own == k + 1).all()), f"output {k} came back wrong"
        assert seen[2]["waited"] > 0.5 > seen[1]["waited"], seen
    finally:
        res = proc.finish()
        box.close()
    assert not res.timed_out, res.stderr[-2000:]


def test_outputs_go_through_the_slots_in_turn_and_wait_for_a_free_one(tmp_path):
    _round_trip(tmp_path, "cpu")


def test_a_worker_cannot_shrink_grow_or_unseal_the_memory_the_trusted_side_maps(tmp_path):
    box = Inbox.create("cpu")
    assert box is not None
    proc = _spawn(HOSTILE_FD, tmp_path, box, {"device": "cpu"})
    try:
        tried = json.loads(next(proc.lines()))
    finally:
        proc.finish()
    try:
        assert tried == {
            "shrink": "Operation not permitted",
            "grow": "Operation not permitted",
            "seal": "Operation not permitted",
        }
        assert box.take(1, box.size).numel() == box.size  # every byte still readable
    finally:
        box.close()


def test_the_judged_copy_is_the_trusted_sides_own(tmp_path):
    box = Inbox.create("cpu")
    assert box is not None
    proc = _spawn(WORKER, tmp_path, box, {"device": "cpu", "n": 1, "nbytes": 4096, "scribble": 1})
    try:
        lines = proc.lines()
        msg = json.loads(next(lines))
        own = box.take(msg["slot"], 4096)
        assert json.loads(next(lines)) == {"scribbled": True}
        assert bool((own == 1).all())  # the worker's later writes do not reach the copy
        fresh = box.take(msg["slot"], 4096)
        assert bool((fresh == 0xEE).all())  # (they did reach the slot)
    finally:
        proc.finish()
        box.close()


def test_a_message_naming_a_slot_that_does_not_exist_breaks_the_protocol(tmp_path):
    (tmp_path / "out").mkdir()
    with OutputDir(tmp_path / "out") as plain:
        with pytest.raises(OutputError, match="never given"):
            plain.arrived("c1", 0)
    box = Inbox.create("cpu")
    assert box is not None
    with OutputDir(tmp_path / "out", box) as out:
        with pytest.raises(OutputError, match="slot 2 of 2"):
            out.arrived("c1", 2)
        out.arrived("c1", 1)
        with pytest.raises(OutputError, match="came through a slot"):
            out.take_slot("c1", box.size + 1)
        out.arrived("c2", 0)
        assert out.take_slot("c2", 16).numel() == 16
        assert out.take_slot("c3", 16) is None  # not through a slot: its file is read
    assert box.closed


def test_an_evaluation_sends_every_output_through_the_slots(monkeypatch):
    task = load_task(ROOT / "examples" / "cpu_task")
    counts = {"slot": 0, "file": 0}
    take, open_file = Inbox.take, OutputDir._open

    def counted_take(self, slot, nbytes):
        counts["slot"] += 1
        return take(self, slot, nbytes)

    def counted_open(self, name, nbytes):
        counts["file"] += 1
        return open_file(self, name, nbytes)

    monkeypatch.setattr(inbox_mod.Inbox, "take", counted_take)
    monkeypatch.setattr(outputs_mod.OutputDir, "_open", counted_open)
    rec = evaluate(task, task.baseline_path, device="cpu", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons
    assert counts["slot"] >= len(rec.checks) // 2 and counts["file"] == 0, counts
    # Without slots (none could be made) the same evaluation reads files.
    monkeypatch.setattr(inbox_mod.Inbox, "create", classmethod(lambda cls, device: None))
    counts.update(slot=0, file=0)
    rec = evaluate(task, task.baseline_path, device="cpu", timing=False)
    assert rec.verdict.accepted and counts["slot"] == 0 and counts["file"] > 0, counts


@pytest.mark.gpu
def test_device_slots_cross_the_sandbox_and_outlive_the_workers_mapping(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _round_trip(tmp_path, "cuda")
    # The worker exited (its mapping gone); a second worker's outputs on fresh slots.
    box = Inbox.create("cuda")
    assert box is not None and box.kind == "cuda"
    proc = _spawn(WORKER, tmp_path, box, {"device": "cuda", "n": 1, "nbytes": 1 << 20})
    try:
        msg = json.loads(next(proc.lines()))
        proc.finish()  # the worker is gone: its mapping and its handle with it
        own = box.take(msg["slot"], 1 << 20)
        assert bool((own == 1).all())
    finally:
        proc.finish()
        box.close()


def test_an_audit_takes_only_the_slot_it_gave_at_the_size_it_expects(tmp_path):
    """The benchmark's audit (interleave_audit._fetch) against forged `output` answers: a
    slot the worker was not given, a size other than the output's, or a slot named by a
    worker that has none is an error (the audit records a problem); an honest answer is a
    private copy, and a refused one still hands its slot back."""
    import types

    from kernelloop.evaluate.trusted.channel.wire import Output
    from kernelloop.evaluate.trusted.clock.interleave_audit import AuditMixin

    box = Inbox.create("cpu", count=1)
    assert box is not None
    sess = AuditMixin()
    sess.out = types.SimpleNamespace(phases_s={})
    sess.workers = {
        "candidate": types.SimpleNamespace(inbox=box, out_dir=tmp_path),
        "best": types.SimpleNamespace(inbox=None, out_dir=tmp_path),
    }
    try:
        with pytest.raises(ValueError, match="slot 1, which it was not given"):
            sess._fetch("candidate", "x.bin", 64, Output(file="", nbytes=64, slot=1))
        with pytest.raises(ValueError, match="not given"):
            sess._fetch("best", "x.bin", 64, Output(file="", nbytes=64, slot=0))
        assert os.read(box._credits_r, 16) == b"c"  # the worker's one credit, taken
        with pytest.raises(ValueError, match="has 65 bytes, expected 64"):
            sess._fetch("candidate", "x.bin", 64, Output(file="", nbytes=65, slot=0))
        assert os.read(box._credits_r, 16) == b"c"  # handed back though refused
        got = sess._fetch("candidate", "x.bin", 64, Output(file="", nbytes=64, slot=0))
        assert isinstance(got, torch.Tensor) and got.numel() == 64
        assert os.read(box._credits_r, 16) == b"c"
        assert sess.out.phases_s == {"audits_via_slot": 1}  # the one taken
        with pytest.raises(FileNotFoundError):  # no slot named: the file, which is absent
            sess._fetch("candidate", "x.bin", 64, Output(file="x.bin", nbytes=64))
    finally:
        box.close()
