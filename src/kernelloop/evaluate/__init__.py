"""What runs around a candidate, split by trust:

- `evaluate/trusted/` judges: plans the calls, launches the sandboxed worker, validates
  every message and byte it sends, computes the reference and decides
  (`kernelloop.evaluate.trusted.run.evaluate`, `...trusted.bench.benchmark`);
- `evaluate/worker/` runs inside the sandbox, in the candidate's process
  (`python -m kernelloop.evaluate.worker`); nothing it says is believed;
- `evaluate/protocol.py` holds the few definitions both sides share.

This file stays empty so that the worker imports as little as possible.
"""
