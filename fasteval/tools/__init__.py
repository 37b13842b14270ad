"""Tools a model can call; looked up by name in ``TOOLS``, each tool's module imported when named."""

from fasteval.tools.base import TOOLS, Tool, ToolContext, ToolResult, make_tool, register_tool

__all__ = ["TOOLS", "Tool", "ToolContext", "ToolResult", "make_tool", "register_tool"]
