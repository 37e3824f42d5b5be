"""The worker's end of the shared output slots (the trusted side's is trusted/channel/inbox.py).

The job's `slots` names a buffer of `count` slots of `bytes` each — device memory on a
GPU (an exported CUDA allocation), a sealed memfd on a CPU — inherited as descriptor
`fd`, and a pipe `credits` from which the trusted side hands out one byte per free slot.
Outputs go to slots in turn (0, 1, ..., count-1, 0, ...), each after one credit: the
trusted side returns a credit once it has copied a slot into its own memory, so no slot
is overwritten before it was read. An output larger than a slot, or a buffer that cannot
be opened here, goes through an output file as before.

Nothing here is trusted: the candidate runs in this process and can write into the
buffer whenever it likes; the trusted side judges only its own copy of a slot, made after
the call's message arrived.
"""

from __future__ import annotations

import mmap
import os
import select
import time

import torch

from kernelloop.evaluate import cuda_vmm


class Outbox:
    def __init__(self, spec: dict) -> None:
        self.count, self.size = int(spec["count"]), int(spec["bytes"])
        self._credits = int(spec["credits"])
        self._next = 0
        fd = int(spec["fd"])
        total = self.count * self.size
        try:
            if spec["kind"] == "cuda":
                device = torch.cuda.current_device()
                uuid = str(torch.cuda.get_device_properties(device).uuid)
                if spec.get("uuid") and spec["uuid"] != uuid:
                    raise cuda_vmm.VmmError("the buffer lives on another GPU than this worker's")
                self._mapping = cuda_vmm.import_fd(fd, total, device)
                self.buf = torch.as_tensor(cuda_vmm.DeviceArray(self._mapping, 0, total))
            else:
                self._mm = mmap.mmap(fd, total, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                self.buf = torch.frombuffer(self._mm, dtype=torch.uint8)
        finally:
            os.close(fd)  # the mapping keeps the memory

    def fits(self, nbytes: int) -> bool:
        return 0 < nbytes <= self.size

    def put(self, flat: torch.Tensor, timeout_s: float = 600.0) -> int:
        """Copy `flat` (uint8, contiguous) into the next slot once it is free; its index.
        The caller synchronises the device before it reports the slot."""
        self._credit(timeout_s)
        slot = self._next
        self._next = (self._next + 1) % self.count
        at = slot * self.size
        self.buf[at : at + flat.numel()].copy_(flat)
        return slot

    def _credit(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the trusted side stopped reading outputs")
            ready, _, _ = select.select([self._credits], [], [], left)
            if ready:
                if not os.read(self._credits, 1):
                    raise EOFError("the trusted side closed the output slots")
                return


def open_outbox(job: dict, log) -> Outbox | None:
    """The job's shared output slots, or None (outputs then go through files)."""
    spec = job.get("slots")
    if not spec:
        return None
    try:
        return Outbox(spec)
    except Exception as e:  # noqa: BLE001 - files are the fallback, whatever went wrong
        log(f"kernelloop worker: shared output slots unavailable, using files ({e})")
        return None
