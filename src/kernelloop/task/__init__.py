from kernelloop.task.load import Task, eval_expr, load_task
from kernelloop.task.roofline import Ceiling, Floor, ceiling_for, floor_on
from kernelloop.task.spec import Rules, Shape, TaskSpec
from kernelloop.task.workspace import WORKSPACE_NAME, workspace_path

__all__ = [
    "Ceiling",
    "Floor",
    "WORKSPACE_NAME",
    "Rules",
    "Shape",
    "Task",
    "TaskSpec",
    "ceiling_for",
    "eval_expr",
    "floor_on",
    "load_task",
    "workspace_path",
]
