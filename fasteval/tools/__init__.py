"""Built-in tools; importing this package registers them by name."""

from fasteval.tools import calculator, image_tools, python_tools, retrieval
from fasteval.tools.base import TOOLS, Tool, ToolContext, ToolResult, make_tool, register_tool

__all__ = ["TOOLS", "Tool", "ToolContext", "ToolResult", "calculator", "image_tools", "make_tool", "python_tools",
           "register_tool", "retrieval"]
