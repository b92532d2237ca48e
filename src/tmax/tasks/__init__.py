"""Task directories in the Harbor layout, plus our ``tmax.json``."""

from tmax.tasks.format import (
    Task,
    TaskConfig,
    TaskFile,
    TaskFormatError,
    TaskMeta,
    read_task,
    write_task,
)

__all__ = [
    "Task",
    "TaskConfig",
    "TaskFile",
    "TaskFormatError",
    "TaskMeta",
    "read_task",
    "write_task",
]
