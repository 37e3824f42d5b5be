"""Starting the sandboxed workers: `prestart.py` (workers started ahead of the job, with
their lane folders and sandbox configuration), `workers.py` (the timing worker's command
loop as the trusted side drives it), `native_source.py` and `compile_cache.py` (building a
CUDA C++ candidate's extension and the compile cache the workers share, read-only),
`gpu_bind.py` (which GPU a worker may see) and `freeze.py` (stopping every other worker
and all it started while one implementation is timed). Knows nothing of how values are
judged or times decided."""
