"""Where a value is decided wrong. `plan.py` plans every correctness call (suites, shapes,
undeclared sizes from `undeclared.py`, seeds); `judge.py` checks every output a worker
sends against the reference (with `compare.py` / `compare_mask.py` for tolerances,
`judge_stochastic.py` for keep/drop outputs, `judge_state.py` for stateful calls,
`judge_interface.py` for the call's shape and dtype, `judge_e2e.py` for the end-to-end
model check, `own_error.py` for the reference's own rounding error, `sensitivity.py` and
`diagnose.py` for what a wrong output says); `shards.py` reads the workers' channels in
parallel lanes; `stages.py` and `record.py` are the verdict and the evaluation record.
`oom.py` tells a candidate's out-of-memory from the trusted side's, and `refcache.py`
shares a round's references between candidates."""
