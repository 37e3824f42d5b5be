#!/usr/bin/env bash
# Issue 17 on nvidia-h200-x2: benchmarks/scaleout.py's parts (PARTS, default all) and the
# 2-GPU tests when TESTS=1. Ray is not in the device image and its wheel (79 MB) exceeds
# what one call may carry, so Ray comes as .ray/raysite.tar.xz (carried; ~30 MB): the
# cp312 wheel unpacked without its Java jars, RLlib and JS source maps, plus jsonschema
# and its dependencies — see benchmarks/README.md for how it is built.
set -u
source benchmarks/device_env.sh
if [ -f .ray/raysite.tar.xz ]; then
  mkdir -p /tmp/raysite && tar -xJf .ray/raysite.tar.xz -C /tmp/raysite
  export PYTHONPATH="$PYTHONPATH:/tmp/raysite"
fi
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"; nvidia-smi -L >> "$S"
python3 -c "import ray; print('ray', ray.__version__)" >> "$S" 2>&1
s=$(date +%s)
timeout "${LIMIT:-480}" python3 benchmarks/scaleout.py "$OUT/so" --parts "${PARTS:-local,aa,ray}" \
  ${SCALEOUT_ARGS:-} > "$OUT/scaleout.log" 2>&1
echo "== scaleout rc=$? $(( $(date +%s) - s ))s" >> "$S"
cut -c1-400 "$OUT/scaleout.log" | tail -8 >> "$S"
if [ "${TESTS:-0}" = 1 ]; then
  s=$(date +%s)
  timeout "${TEST_LIMIT:-200}" python3 -m pytest -m gpu -v -p no:cacheprovider \
    tests/executor/test_scaleout_gpu.py > "$OUT/pytest.txt" 2>&1
  echo "== scale-out gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
  grep -E "PASSED|FAILED|ERROR|passed|failed|^E  " "$OUT/pytest.txt" | tail -20 >> "$S"
fi
cat "$S"
