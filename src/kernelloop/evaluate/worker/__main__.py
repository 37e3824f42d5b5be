"""`python -m kernelloop.evaluate.worker`: the sandboxed worker's entry point."""

import os

from kernelloop.evaluate.worker import main as _worker  # sets up the channel before anything else

if __name__ == "__main__":
    code = _worker.main()
    _worker._CHANNEL.flush()
    os._exit(code)  # skip atexit hooks a candidate may have registered
