"""Reading a call's output through a bounded staging area (trusted/channel/staging.py,
OutputDir.read_into): the bytes arrive whole and in order however the chunks fall, the
file is checked and removed as `read` does, and nothing is reused before it is copied."""

from __future__ import annotations

import os

import pytest
import torch

from kernelloop.evaluate.trusted.channel.outputs import OutputDir, OutputError
from kernelloop.evaluate.trusted.channel.staging import Staging
from tests.evaluate.test_channel_fuzz import IDS

CID = IDS[0]


def _write(tmp_path, data: bytes) -> OutputDir:
    (tmp_path / f"{CID}.bin").write_bytes(data)
    return OutputDir(tmp_path)


@pytest.mark.parametrize("nbytes", [1, 63, 64, 65, 128, 1000])
def test_read_into_delivers_every_byte_in_order_through_two_small_views(tmp_path, nbytes):
    data = os.urandom(nbytes)
    outputs = _write(tmp_path, data)
    bufs = [bytearray(64), bytearray(64)]
    got, order = bytearray(), []

    def done(k, n):
        order.append(k)
        got.extend(bufs[k][:n])

    outputs.read_into(CID, nbytes, [memoryview(b) for b in bufs], done)
    assert bytes(got) == data
    assert order == [k % 2 for k in range(len(order))] and len(order) == -(-nbytes // 64)
    assert not (tmp_path / f"{CID}.bin").exists()
    outputs.close()


def test_large_views_are_read_in_parallel_slices_each_at_its_own_offset(tmp_path, monkeypatch):
    # Slices of 4 KiB (READ_SLICE lowered), so a 64 KiB view is read by 4 threads at
    # once: every byte must still land at its own place, across chunks of uneven length.
    from kernelloop.evaluate.trusted.channel import outputs as out_mod

    monkeypatch.setattr(out_mod, "READ_SLICE", 4096)
    monkeypatch.setattr(out_mod, "READ_THREADS", 4)
    data = os.urandom(3 * 65536 + 777)
    outputs = _write(tmp_path, data)
    bufs = [bytearray(65536), bytearray(65536)]
    got = bytearray()
    outputs.read_into(
        CID, len(data), [memoryview(b) for b in bufs], lambda k, n: got.extend(bufs[k][:n])
    )
    assert bytes(got) == data
    outputs.close()
    # A file that ends inside a slice is a short read, whichever thread meets the end.
    (tmp_path / "short.bin").write_bytes(data[:10000])
    fd = os.open(tmp_path / "short.bin", os.O_RDONLY)
    try:
        assert not out_mod.read_exactly_at(fd, memoryview(bytearray(16384)), 0)
        view = memoryview(bytearray(8192))
        assert out_mod.read_exactly_at(fd, view, 1000) and bytes(view) == data[1000:9192]
    finally:
        os.close(fd)


def test_read_into_refuses_a_file_of_the_wrong_size_and_removes_it(tmp_path):
    outputs = _write(tmp_path, b"x" * 100)
    with pytest.raises(OutputError, match="100 bytes, expected 128"):
        outputs.read_into(CID, 128, [memoryview(bytearray(64))], lambda k, n: None)
    assert not (tmp_path / f"{CID}.bin").exists()
    outputs.close()


def test_read_into_refuses_a_link_without_touching_its_target(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "secret").write_bytes(b"s" * 64)
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{CID}.bin").symlink_to(target / "secret")
    outputs = OutputDir(out)
    with pytest.raises(OutputError, match="symbolic link"):
        outputs.read_into(CID, 64, [memoryview(bytearray(64))], lambda k, n: None)
    assert (target / "secret").read_bytes() == b"s" * 64
    outputs.close()


def test_staging_on_the_cpu_reads_the_tensor_as_it_was_written(tmp_path):
    t = torch.randn(7, 129, dtype=torch.float32)
    outputs = _write(tmp_path, t.numpy().tobytes())
    got = Staging().load(outputs, CID, torch.empty_like(t))
    assert torch.equal(got, t)
    outputs.close()


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 8, 33])
def test_gpu_staging_copies_every_chunk_to_the_device(tmp_path, rows):
    t = torch.randn(rows, 1000, dtype=torch.bfloat16)
    outputs = _write(tmp_path, t.view(torch.uint8).numpy().tobytes())
    like = torch.empty_like(t, device="cuda")
    got = Staging(chunk=4096).load(outputs, CID, like)  # several chunks, both buffers reused
    assert got.device.type == "cuda" and torch.equal(got.cpu(), t)
    outputs.close()
