"""The bytes between the sides: `wire.py` (framing), `messages.py` (the pydantic models of
every message a worker may send), `channel.py` (reading and validating a worker's
stream), `inbox.py` and `outputs.py` (the shared output slots and files a worker's tensors
arrive in), `staging.py` (an output file read onto the judge's device through bounded,
page-locked buffers) and `text.py` (quoting a worker's words, tracebacks and compiler
output safely). Knows nothing of judging or timing."""
