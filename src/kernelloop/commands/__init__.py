"""CLI sub-commands, one module per role; each module defines `register(app)`.

Add a module name here to put its commands on the `kernelloop` CLI.
"""

COMMAND_MODULES = [
    "kernelloop.commands.task_cmds",
    "kernelloop.commands.contract_cmds",
    "kernelloop.commands.run_cmds",
    "kernelloop.commands.suite_cmds",
    "kernelloop.commands.import_cmds",
    "kernelloop.commands.history_cmds",
    "kernelloop.commands.bench_cmds",
    "kernelloop.commands.profile_cmds",
    "kernelloop.commands.report_cmds",
    "kernelloop.commands.mcp_cmds",
    "kernelloop.commands.gatecheck_cmds",
]
