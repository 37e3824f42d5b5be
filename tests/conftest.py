import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
FLAGSHIP = ROOT / "examples" / "ln_softmax_dropout"
FUSED = FLAGSHIP / "candidates" / "fused_naive.py"


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip)


@pytest.fixture(scope="session")
def flagship():
    from kernelloop.task import load_task

    return load_task(FLAGSHIP)


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-should-never-leak")
    yield "sk-test-SECRET-should-never-leak"


os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
