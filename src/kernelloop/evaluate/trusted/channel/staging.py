"""A call's output file read onto the judge's device through a bounded staging area.

Reading a GPU-sized output into a fresh host buffer and copying it to the GPU cost the
judge most of its time on the H200 (2026-12-01, flagship, ~22 GB of outputs per
evaluation: 15 of its 28 s — a zero-filled `bytearray` per call, a read into it, and a
copy from pageable memory). Here the file is read in 64 MB chunks into two page-locked
buffers, each copied to the device asynchronously while the other is filled, into one
device tensor: host memory stays bounded (a 6.4 GB KernelBench output needs no 6.4 GB
host buffer) and the copy overlaps the read. The file is checked exactly as
`OutputDir.read` checks it; on a CPU it is read as before. An output that came through a
shared slot (trusted/channel/inbox.py) skips all of this: one copy of the slot on the device.
"""

from __future__ import annotations

import torch

from kernelloop.evaluate.trusted.channel.outputs import OutputDir

CHUNK = 64 << 20


class Staging:
    """Two page-locked chunks of host memory for one judge (made at the first use)."""

    def __init__(self, chunk: int = CHUNK) -> None:
        self.chunk = chunk
        self._bufs: list[torch.Tensor] = []
        self._views: list[memoryview] = []

    def _ensure(self) -> None:
        if not self._bufs:
            try:
                self._bufs = [
                    torch.empty(self.chunk, dtype=torch.uint8, pin_memory=True) for _ in range(2)
                ]
            except RuntimeError:  # no page-locked memory to be had: slower, same bytes
                self._bufs = [torch.empty(self.chunk, dtype=torch.uint8) for _ in range(2)]
            self._views = [memoryview(b.numpy()) for b in self._bufs]

    def load(self, outputs: OutputDir, call_id: str, like: torch.Tensor) -> torch.Tensor:
        """The call's output bytes as a tensor shaped like `like`, on `like`'s device."""
        nbytes = like.numel() * like.element_size()
        if nbytes and (own := outputs.take_slot(call_id, nbytes)) is not None:
            return own.view(like.dtype).reshape(like.shape).to(like.device)
        if like.device.type != "cuda" or nbytes == 0:
            raw = outputs.read(call_id, nbytes)
            if nbytes == 0:
                return torch.empty_like(like)
            flat = torch.frombuffer(raw, dtype=torch.uint8)
            return flat.view(like.dtype).reshape(like.shape).to(like.device)
        self._ensure()
        with torch.cuda.device(like.device):
            dst = torch.empty(nbytes, dtype=torch.uint8, device=like.device)
            events: list[torch.cuda.Event | None] = [None, None]
            at = 0

            def done(k: int, n: int) -> None:
                nonlocal at
                dst[at : at + n].copy_(self._bufs[k][:n], non_blocking=True)
                ev = torch.cuda.Event()
                ev.record()
                events[k] = ev
                at += n
                other = events[1 - k]
                if other is not None:  # the next chunk is read into the other buffer
                    other.synchronize()

            try:
                outputs.read_into(call_id, nbytes, self._views, done)
            finally:
                for ev in events:  # neither buffer is reused before its copy is done
                    if ev is not None:
                        ev.synchronize()
        return dst.view(like.dtype).reshape(like.shape)
