"""The key holder runs as `python -m kernelloop.agents.llm.keyholder` (sandbox/
trusted_env.py). Issue 47: every run warned "RuntimeWarning: 'kernelloop.agents.llm.
keyholder' found in sys.modules after import of package 'kernelloop.agents.llm'", because
the package imported the module it is asked to run. Run as runpy runs it, warnings as
errors: a real subprocess, nothing mocked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).parents[2] / "src"


def test_running_the_key_holder_as_a_module_raises_no_runtime_warning():
    code = (
        "import runpy\n"
        "runpy.run_module('kernelloop.agents.llm.keyholder', run_name='not_main')\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
