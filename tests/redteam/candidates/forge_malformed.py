# ruff: noqa: F821  (these names come with the thief, pasted in by harness.candidate_source)
"""Red team (issue 12, finding 4): with the stolen key, one malformed line on the channel
(the test fills in which), then the worker stops. The old trusted side raised on most of
these (a list where a string was expected, a string where a dict was), which ended
`kernelloop run` and left the MCP server's worker running."""

# {{THIEF}}

leave_a_process("{{TOKEN}}")
_key, _chan, _job, _ways = steal()
CALL = _job["calls"][0]
OK = ok_call(CALL)
forge(eval(r""" {{CASE}} """))  # the test names the line
_chan.flush()
_os._exit(0)


def forward(x, residual, weight, bias, *, p, eps, seed):
    raise AssertionError("never called")
