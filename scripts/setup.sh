#!/usr/bin/env bash
# Create .venv with kernelloop and its pinned dependencies. On a CPU machine torch is
# the CPU build; on a GPU machine whose Python already has torch+triton, pass
# --system-site-packages through KERNELLOOP_VENV_ARGS to reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."
# The sandbox needs bubblewrap and libseccomp2 (there is no fallback: without them the
# evaluator refuses to start a candidate unless told --sandbox none).
if ! command -v bwrap >/dev/null 2>&1 || ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq bubblewrap libseccomp2) >/dev/null 2>&1 \
      || { echo "setup: could not install bubblewrap and libseccomp2 with apt-get; install them, then rerun" >&2; exit 1; }
  else
    echo "setup: the sandbox needs bubblewrap and libseccomp2; install them (apt-get install bubblewrap libseccomp2)" >&2
    exit 1
  fi
fi
python3 -m venv ${KERNELLOOP_VENV_ARGS:-} .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/pip install -q -c requirements/ci-constraints.txt "torch==2.13.0"
fi
# Ray (the `cluster` extra, for --executor ray) is left out of the default setup, which
# took 111 s with it (issue 36; the aim is <= 90 s). `.venv/bin/pip install -e ".[cluster]"`
# adds it; CI does (.ci/run), for tests/executor/test_ray*.py.
.venv/bin/pip install -q -c requirements/ci-constraints.txt -e ".[dev]"
echo "kernelloop installed in .venv"
