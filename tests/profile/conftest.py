from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.profile import KernelProfile, parse_ncu_csv

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def synthetic_text() -> str:
    # Hand-made (SYNTHETIC) from the documented details-page format, not a capture:
    # kernel 0 imitates the naive fused tl.rand kernel (DRAM ~20%, ALU busiest), kernel 1 a
    # memory-bound LayerNorm reported only through section labels and auto-scaled units.
    return (FIXTURES / "synthetic_details.csv").read_text()


@pytest.fixture(scope="session")
def synthetic(synthetic_text: str) -> list[KernelProfile]:
    return parse_ncu_csv(synthetic_text)
