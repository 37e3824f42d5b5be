"""The determinism suite's fingerprints (trusted/values/judge_state.py): the judge holds each
group's first output as 8 keyed bytes until its repeat runs last, so equal bytes must give
equal fingerprints and any difference a different one, including differences that cancel
in a plain sum (two swapped elements, two sign flips)."""

import torch

from kernelloop.evaluate.trusted.values.judge_state import fingerprint


def test_equal_bytes_equal_fingerprints_and_every_kind_of_difference_shows():
    g = torch.Generator().manual_seed(1)
    key = 0x5EED1234567
    for dtype, n in ((torch.float32, 4099), (torch.bfloat16, 1001), (torch.float16, 7)):
        a = torch.randn(n, generator=g).to(dtype)
        fa = fingerprint(a, key)
        assert fa == fingerprint(a.clone(), key)
        assert fa != fingerprint(a, key + 2)  # another judge, another key
        swapped = a.clone()
        swapped[[0, -1]] = a[[-1, 0]]
        signs = a.clone()
        signs[[1, 3]] = -signs[[1, 3]]
        last_bit = a.clone().view(torch.uint8)
        last_bit[-1] ^= 1
        for other in (swapped, signs, last_bit.view(dtype), torch.zeros_like(a)):
            assert fingerprint(other, key) != fa
    # only the bytes count: a length change shows even when the extra bytes are zeros
    z = torch.zeros(8, dtype=torch.uint8)
    assert fingerprint(z, key) != fingerprint(z[:7], key)


def test_an_output_longer_than_one_chunk_is_covered_to_its_last_word(monkeypatch):
    from kernelloop.evaluate.trusted.values import judge_state

    monkeypatch.setattr(judge_state, "CHUNK_WORDS", 1000)  # 10 chunks, as on a GPU output
    a = torch.randn(10_001)
    for at in (0, 999, 1000, 5_555, 10_000):
        b = a.clone()
        b[at] += 1.0
        assert fingerprint(a, 99) == fingerprint(a.clone(), 99) != fingerprint(b, 99), at
