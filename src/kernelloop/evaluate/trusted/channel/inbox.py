"""Shared output slots: a correctness worker's outputs reach the judge without files.

Writing every output to a file and reading it back was most of an evaluation's full stage
on the H200 (2026-12-02, flagship: ~22 GB of outputs per evaluation, each copied device ->
host -> tmpfs -> host -> device). Here the trusted side allocates `count` slots of
`bytes` each — device memory on a GPU, exported as a file descriptor through the CUDA
driver's VMM API (evaluate/cuda_vmm.py: the legacy CUDA IPC handles cannot cross the
sandbox's PID namespace); on a CPU a memfd — and the worker inherits the descriptor and
copies each output into the next slot (worker/outbox.py). The worker takes one byte from
the `credits` pipe per slot it fills; the trusted side gives one back once the slot is
copied into its own memory.

Why it is safe with a hostile worker: the candidate can write into the slots at any time,
so a slot's bytes are the candidate's to choose exactly as an output file's were. The
judge never reads a slot in place: it copies the slot the call's message names into
memory the worker cannot reach (`take`) and judges only that copy. The memfd is sealed
against shrinking and growing before the worker gets it (a shrunk file would fault the
trusted side's reads); a device allocation stays alive while the trusted side maps it,
whatever the worker unmaps or releases. The slot a message names is checked against the
slot count; an output larger than a slot never comes through one.
"""

from __future__ import annotations

import fcntl
import mmap
import os

import numpy as np
import torch

from kernelloop.evaluate import cuda_vmm

CUDA_SLOT_BYTES = 512 << 20  # a 16384x8192 fp32 output; larger outputs use files
HOST_SLOT_BYTES = 256 << 20  # sparse: memory is used only as far as outputs are written
SLOTS = 2  # one filled while the other is judged


class Inbox:
    """The trusted end of one worker's slots (make with `create`)."""

    def __init__(self, kind: str, count: int, size: int, fd: int, device) -> None:
        self.kind, self.count, self.size, self.device = kind, count, size, device
        self._fd = fd  # the descriptor the worker inherits (closed here after the start)
        self._mapping: cuda_vmm.Mapping | None = None
        self._mm: mmap.mmap | None = None
        self._credits_r, self._credits_w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._credits_w, False)
        self._numbers = (fd, self._credits_r)  # the worker's numbers for them (pass_fds)
        self.uuid = ""
        self.closed = False

    @classmethod
    def create(cls, device: str, count: int = SLOTS) -> Inbox | None:
        """Slots for one worker on `device` ("cuda": torch's current device), or None
        where they cannot be had (the evaluation then uses output files)."""
        try:
            if device == "cuda":
                index = torch.cuda.current_device()
                size = CUDA_SLOT_BYTES
                mapping, fd = cuda_vmm.allocate(count * size, index)
                box = cls("cuda", count, size, fd, torch.device("cuda", index))
                box._mapping = mapping
                box.uuid = str(torch.cuda.get_device_properties(index).uuid)
                view = torch.as_tensor(cuda_vmm.DeviceArray(mapping, 0, mapping.size))
                view.fill_(0xFF)  # nothing of an earlier owner of the memory shows through
                torch.cuda.current_stream(box.device).synchronize()
            else:
                size = HOST_SLOT_BYTES
                fd = os.memfd_create("kernelloop-slots", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
                os.ftruncate(fd, count * size)
                fcntl.fcntl(
                    fd,
                    fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL,
                )
                box = cls("host", count, size, fd, torch.device("cpu"))
                box._mm = mmap.mmap(fd, count * size, mmap.MAP_SHARED, mmap.PROT_READ)
        except (cuda_vmm.VmmError, OSError, RuntimeError):
            return None
        os.write(box._credits_w, b"c" * count)
        return box

    def child_fds(self) -> list[int]:
        """The descriptors the worker inherits (the buffer and the credits' read end)."""
        return [self._fd, self._credits_r]

    def job(self) -> dict:
        """What the worker's job says of the slots (worker/outbox.py)."""
        return {
            "kind": self.kind,
            "fd": self._numbers[0],
            "credits": self._numbers[1],
            "count": self.count,
            "bytes": self.size,
            "uuid": self.uuid,
        }

    def started(self) -> None:
        """The worker has its copies of the descriptors: drop ours of its ends."""
        for fd in (self._fd, self._credits_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._fd = self._credits_r = -1

    def take(self, slot: int, nbytes: int) -> torch.Tensor:
        """A private copy (uint8, on this inbox's device) of the slot's first `nbytes`
        bytes; the slot goes back to the worker once the copy is complete. The slot and
        the size were checked against the message (`OutputDir.arrived`, `take_slot`)."""
        at = slot * self.size
        try:
            if self._mapping is not None:
                src = torch.as_tensor(cuda_vmm.DeviceArray(self._mapping, at, nbytes))
                own = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
                own.copy_(src)
                torch.cuda.current_stream(self.device).synchronize()
            else:
                assert self._mm is not None
                own = torch.from_numpy(np.frombuffer(self._mm, np.uint8, nbytes, at).copy())
        finally:
            self.release()
        return own

    def release(self) -> None:
        """One slot back to the worker (a full pipe means it has more than it needs)."""
        if self._credits_w < 0:
            return
        try:
            os.write(self._credits_w, b"c")
        except (BlockingIOError, OSError):
            pass

    def stop_credits(self) -> None:
        """No more slots for the worker (the channel was violated and nothing it sends is
        read): its next `put` sees the pipe closed instead of waiting for its deadline."""
        if self._credits_w >= 0:
            try:
                os.close(self._credits_w)
            except OSError:
                pass
            self._credits_w = -1

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.started()
        self.stop_credits()
        if self._mapping is not None:
            self._mapping.close()
        if self._mm is not None:
            self._mm.close()
