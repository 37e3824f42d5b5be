# ruff: noqa: F821  (these names come with the thief, pasted in by harness.candidate_source)
"""Red team (issue 12, finding 3): put a symlink to a file outside where a call's output
belongs (`out/<id>.bin`), then report that call with the stolen key. The trusted side
must not read, follow or remove anything through it."""

# {{THIEF}}

leave_a_process("{{TOKEN}}")
_key, _chan, _job, _ways = steal()
_call = _job["calls"][-1]
_os.symlink("{{TARGET}}", _os.path.join(_job["out_dir"], _call["id"] + ".bin"))
forge(ok_call(_call))
_chan.flush()
_os._exit(0)


def forward(x, residual, weight, bias, *, p, eps, seed):
    raise AssertionError("never called")
