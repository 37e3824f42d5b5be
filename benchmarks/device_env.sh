# Sourced at the start of every device script (the H200 image has torch/triton but not
# our pure-Python dependencies, and no registry access). Expects, carried from the
# checkout: .whl/ (pydantic, pydantic_core cp312, annotated_types, typing_inspection)
# and .carry/bubblewrap_*.deb — see benchmarks/README.md for how to download them.
# A warm machine keeps .site between calls, and a second --target install into it broke
# pydantic's import (2026-12-03): start from an empty one.
rm -rf "$PWD/.site"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$PWD/.site" .whl/*.whl >/dev/null 2>&1
export PYTHONPATH="$PWD/src:$PWD/.site" PYTHONUNBUFFERED=1 PATH="$PWD/.site/bin:$PATH"
mkdir -p /tmp/bw && dpkg -x .carry/bubblewrap_*.deb /tmp/bw && export KERNELLOOP_BWRAP=/tmp/bw/usr/bin/bwrap
: "${OUT:=/tmp/kernelloop_out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$OUT/env.txt"
python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> "$OUT/env.txt"
