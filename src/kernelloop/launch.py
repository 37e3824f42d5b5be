"""The `kernelloop` program: confine the environment, then run the command line.

First, before the CLI's imports: `trusted_env.confine()` re-executes the process with an
allow-listed environment (no model keys, tokens, proxies or cloud credentials), because
every command may run trusted task code (docs/security.md, "Task code and the model
keys"). Doing it here costs one bare interpreter start; `cli.main` confines too, for an
install whose `kernelloop` script still points there.
"""

from __future__ import annotations


def main() -> None:
    from kernelloop.sandbox.trusted_env import confine

    confine()
    from kernelloop.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
