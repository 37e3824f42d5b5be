from kernelloop.task.load import Task, eval_expr, load_task
from kernelloop.task.spec import Rules, Shape, TaskSpec

__all__ = ["Rules", "Shape", "Task", "TaskSpec", "eval_expr", "load_task"]
