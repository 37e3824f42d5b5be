"""kernelloop: a closed loop that turns an LLM agent into a GPU kernel optimizer."""

__version__ = "0.1.0"
