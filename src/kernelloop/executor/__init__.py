"""Who runs a round's evaluations, and where: one protocol (submit a job, get a future of
its record). `InTurn` runs each job as it is submitted, in the caller's thread, on the one
device the run has; the per-GPU local executor and the Ray executor (issue #17) implement
the same protocol, so the round does not change when they arrive."""

from kernelloop.executor.base import Executor, InTurn, Job, JobLost, Slot

__all__ = ["Executor", "InTurn", "Job", "JobLost", "Slot"]
