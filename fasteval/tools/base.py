"""What a tool is: a JSON schema the model sees and an async ``run`` the agent loop calls.

Tools never raise for bad model input: they return a ToolResult with status ``error`` and a
message the model can read and act on. Shared resources (sandbox pool, cache, HTTP session,
model roles) arrive through ``ToolContext.services`` so tools stay free of globals.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fasteval.core.options import OptionSchema
from fasteval.core.registry import LazyRegistry
from fasteval.core.types import ImageRef, Task, ToolStatus
from fasteval.runfolder.blobs import BlobStore

Fidelity = str  # "reference" reproduces the benchmark harness; "fixed" is our corrected behaviour


@dataclass(slots=True)
class ToolContext:
    """What a tool may touch while serving one job."""

    blobs: BlobStore
    task: Task
    images: list[ImageRef]
    """Original images of the task shown so far, in order (tools index into these)."""
    fidelity: Fidelity = "reference"
    session_id: str = ""
    """The job id: lets stateful tools (sandbox sessions) pin state to one trajectory."""
    services: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ToolResult:
    status: ToolStatus
    output: str = ""
    images: list[ImageRef] = field(default_factory=list)
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Facts recorded on the tool call but not shown to the model (provider, query, ranks)."""

    @classmethod
    def fail(cls, message: str, **extra: Any) -> ToolResult:
        return cls(status="error", output=message, error=message, extra=dict(extra))


class Tool(ABC):
    """A callable the model can invoke by name."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    requires: ClassVar[tuple[str, ...]] = ()
    """Services (fasteval.services.registry) this tool needs in ``ToolContext.services``."""
    limiter: ClassVar[str | None] = None
    """Name of the limiter (fasteval.services.limiters) a call holds, for tools that call external APIs."""
    default_concurrency: ClassVar[int] = 16
    option_schema: ClassVar[OptionSchema | None] = None
    """The tool's own options in ``tool_options`` (fidelity and concurrency are always allowed)."""
    """Size of that limiter unless the tool option ``concurrency`` or ``run.limits`` says otherwise."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    def spec(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    keeps_sessions: ClassVar[bool] = False
    """Whether calls may keep state for their job (``ToolContext.session_id``) that ``end_session`` frees."""

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Execute one call; never raise for bad arguments, return ToolResult.fail instead."""

    async def end_session(self, session_id: str, services: dict[str, Any]) -> None:  # noqa: B027
        """Free what this tool keeps for one job; the job runner calls it whatever ended the job."""

    def prepare(self, services: dict[str, Any]) -> None:  # noqa: B027
        """The first job that offers this tool opens: begin, in the background, what its calls
        will need (the sandbox's workers start beside that job's first model request, and not
        at all in a run that has no such job left). Must not block."""


# Built-in tools by the module that defines them; a tool's module is imported when it is named.
TOOLS: LazyRegistry[type[Tool]] = LazyRegistry("tool", {
    "calculator": "fasteval.tools.calculator",
    "image_zoom_in_tool": "fasteval.tools.image_tools",
    "rotate_image": "fasteval.tools.image_tools",
    "python_image_processing": "fasteval.tools.python_tools",
    "python_interpreter": "fasteval.tools.python_tools",
    "web_search": "fasteval.tools.retrieval.search",
    "google_search": "fasteval.tools.retrieval.search",
    "historical_weather": "fasteval.tools.retrieval.weather",
    "browser_get_page_text": "fasteval.tools.retrieval.browse",
    "text_search_tool": "fasteval.tools.retrieval.text_search",
    # A tool of one benchmark lives with it (a benchmark is one place); named here by module, so the
    # registry knows it before any suite is imported, and naming it imports that module only.
    "image_search_tool": "fasteval.suites.vistahop.tools",
}, key=lambda cls: cls.name)


def register_tool(cls: type[Tool]) -> type[Tool]:
    """Class decorator: make a tool available by name to suites and configs."""
    return TOOLS.register(cls)


def make_tool(name: str, **options: Any) -> Tool:
    return TOOLS[name](**options)
