"""`python -m kernelloop`: the same command line as the `kernelloop` script."""

from kernelloop.cli import main

main()
