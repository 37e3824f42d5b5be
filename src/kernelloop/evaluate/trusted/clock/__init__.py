"""Where a time is decided. The benchmark's session (`interleave.py`) starts one sandboxed
worker per implementation and times them in shuffled, interleaved rounds
(`interleave_rounds.py`; run-through batches on a GPU, `through.py`); the trusted clock's
checks (`timing_checks.py`, `clock_view.py`) compare what each worker reports with what
the trusted side saw, audits (`interleave_audit.py`) check timed outputs against the
reference, and `bench_fill.py` / `bench_record.py` turn the samples into the record the
gate reads (medians, paired speedups, noise, A/A). `memory_plan.py` sizes batches to the
device, `gpu_state.py` records the clocks around a run. Nothing here judges values: it
asks `values/` (through the worker launch) where an output must be checked."""
