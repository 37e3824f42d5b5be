"""`python -m kernelloop`: the same program as the `kernelloop` script (launch.py: the
environment confined first, then the command line)."""

from kernelloop.launch import main

main()
