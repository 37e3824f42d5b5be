#!/usr/bin/env bash
# Create .venv with kernelloop and its pinned dependencies. On a CPU machine torch is
# the CPU build; on a GPU machine whose Python already has torch+triton, pass
# --system-site-packages through KERNELLOOP_VENV_ARGS to reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1 || echo "note: bubblewrap not installed; the sandbox falls back to unshare"
fi
python3 -m venv ${KERNELLOOP_VENV_ARGS:-} .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/pip install -q -c requirements/ci-constraints.txt "torch==2.13.0"
fi
.venv/bin/pip install -q -c requirements/ci-constraints.txt -e ".[dev]"
echo "kernelloop installed in .venv"
