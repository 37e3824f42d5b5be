"""The trusted side: plans the calls, launches the sandboxed workers, validates every
message and byte they send back, compares against the reference, times, and decides.

It never imports candidate code, and never imports `kernelloop.evaluate.worker`. Rooms,
top to bottom (each imports only the rooms below it; pyproject.toml's `trusted-rooms`
contract holds it):

- `run.py`, `run_record.py` — `evaluate`: orders the stages of one candidate's judging
  and writes its record; `bench.py`, `bench_pending.py` — `benchmark`: the gate's timing;
- `clock/` — where a time is decided: the interleaved rounds, the trusted clock's checks
  of what a worker reports, the audits of timed outputs, the benchmark record's numbers;
- `launch/` — starting sandboxed workers (prestarted or per job), building native
  sources, the compile cache, GPU binding;
- `values/` — where a value is decided wrong: the call plan, the judge of every output
  against the reference, tolerances, stochastic and end-to-end checks, the verdict record;
- `screen/` — the static screen of a candidate's source, before anything runs;
- `channel/` — the bytes between the sides: wire format, messages, the inbox and output
  slots, and the text helpers that quote a worker's words safely.
"""
