#!/usr/bin/env bash
# Every gpu-marked test in the repository, on the device (session 3, call 2).
# PYTEST_EXTRA: more pytest arguments (e.g. a --deselect for a test that needs its own call).
set -u
source benchmarks/device_env.sh
S=$OUT/summary.txt; cat "$OUT/env.txt" > "$S"
# tests/mcp has no gpu test, and the device image lacks the MCP SDK its modules import.
python3 -c "import mcp" 2>/dev/null || IGNORE=--ignore=tests/mcp
s=$(date +%s)
timeout "${LIMIT:-540}" python3 -m pytest -m gpu -v -p no:cacheprovider --durations=0 ${IGNORE:-} ${PYTEST_EXTRA:-} tests > "$OUT/pytest.txt" 2>&1
echo "== pytest -m gpu tests rc=$? $(( $(date +%s) - s ))s" >> "$S"
grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|^[0-9.]+s call" "$OUT/pytest.txt" | tail -60 >> "$S"
cat "$S"
