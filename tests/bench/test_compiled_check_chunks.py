"""The compiled slot's check against eager (worker/compiled.py) in float64 a chunk at a
time: the same verdict, count and max error as one whole-tensor comparison, without whole
float64 copies (a 6 GiB output asked for 12 GiB each and ran the slot out of memory on the
H200 beside the baseline's worker, 2026-12-05)."""

import pytest
import torch

from kernelloop.evaluate.worker import compiled


def _whole(o: torch.Tensor, w: torch.Tensor, atol: float, rtol: float) -> tuple[int, float]:
    o64, w64 = o.double(), w.double()
    close = torch.isclose(o64, w64, atol=atol, rtol=rtol, equal_nan=True)
    return int((~close).sum()), (o64 - w64).abs().nan_to_num(float("inf")).max().item()


@pytest.mark.parametrize("chunk", [7, 64, 1 << 24])
def test_chunked_check_counts_like_the_whole_tensor(monkeypatch, chunk):
    monkeypatch.setattr(compiled, "CHECK_CHUNK", chunk)
    g = torch.Generator().manual_seed(0)
    want = torch.randn(33, 29, generator=g)
    out = want.clone()
    out[0, 0] += 1e-3  # off, in the first chunk
    out[-1, -1] += 0.5  # off, in the last chunk
    out[10, 3] += 1e-9  # within tolerance
    out[5, 5] = float("nan")  # NaN where eager is not: off
    got = compiled._off(out.reshape(-1), want.reshape(-1), 1e-5, 1e-5)
    assert got == _whole(out, want, 1e-5, 1e-5)
    assert got[0] == 3 and got[1] == float("inf")  # the NaN counts as an infinite error
    said = compiled._differs(out, want, 1e-5, 1e-5)
    assert said == "output 0: 3 elements off, max abs err inf"
    assert compiled._differs(want.clone(), want, 0.0, 0.0) == ""
    t = want.t()  # not contiguous: compared as it is laid out logically
    assert compiled._differs(t.clone() + 1.0, t, 1e-5, 1e-5).startswith("output 0: 957 elements")
