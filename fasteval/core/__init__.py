"""The vocabulary every layer speaks: types, options, errors, exit codes, redaction, pricing, version.

It imports nothing of ours, so any module may use it without dragging in another layer.
"""

from fasteval.core.errors import ConfigError, ModelConfigError
from fasteval.core.exitcodes import (
    EXIT_INCOMPLETE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_JOB_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    exit_code_for,
)
from fasteval.core.registry import LazyRegistry
from fasteval.core.types import (
    Identity,
    ImageRef,
    Job,
    Message,
    Record,
    Task,
    ToolCall,
    Trajectory,
    Turn,
    Usage,
)

__all__ = ["EXIT_INCOMPLETE", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_JOB_ERRORS", "EXIT_OK", "EXIT_USAGE",
           "ConfigError", "Identity", "ImageRef", "Job", "LazyRegistry", "Message", "ModelConfigError", "Record",
           "Task", "ToolCall", "Trajectory", "Turn", "Usage", "exit_code_for"]
