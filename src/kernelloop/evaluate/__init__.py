"""What runs around a candidate: the trusted judge and the sandboxed worker.

Import `kernelloop.evaluate.run.evaluate` for the API; this package file stays empty so
that the worker (`python -m kernelloop.evaluate.worker`) imports as little as possible.
"""
