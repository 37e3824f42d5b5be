from kernelloop.task.load import Task, eval_expr, load_task
from kernelloop.task.spec import Rules, Shape, TaskSpec
from kernelloop.task.workspace import WORKSPACE_NAME, workspace_path

__all__ = [
    "WORKSPACE_NAME",
    "Rules",
    "Shape",
    "Task",
    "TaskSpec",
    "eval_expr",
    "load_task",
    "workspace_path",
]
