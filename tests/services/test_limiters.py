"""Named limiters bound the concurrency of tools that call external APIs, and report their counts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

from fasteval.core.types import Task
from fasteval.engine.run.agent import AgentEnv, execute_tool
from fasteval.runfolder.blobs import BlobStore
from fasteval.services.limiters import Limiters
from fasteval.tools.base import Tool, ToolContext, ToolResult
from providers.base import ToolCallRequest


class SlowLookup(Tool):
    """A tool that waits on an 'upstream' and records how many calls overlap."""

    name = "slow_lookup"
    description = "test"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    limiter = "lookup_api"
    default_concurrency = 3
    active = 0
    peak = 0

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        SlowLookup.active += 1
        SlowLookup.peak = max(SlowLookup.peak, SlowLookup.active)
        await asyncio.sleep(0.01)
        SlowLookup.active -= 1
        return ToolResult(status="ok", output="found")


async def test_tool_calls_hold_a_named_limiter_slot(tmp_path: Path) -> None:
    limiters = Limiters()
    tool = SlowLookup()
    blobs = BlobStore(tmp_path)
    env = AgentEnv(client=None, suite=None, setting=None, tools={tool.name: tool}, blobs=blobs,  # type: ignore[arg-type]
                   services={"limiters": limiters})
    ctx = ToolContext(blobs=blobs, task=Task(id="t", turns=[]), images=[])
    results = await asyncio.gather(*(execute_tool(ToolCallRequest(str(i), tool.name, "{}"), env, ctx)
                                     for i in range(20)))
    assert all(r.status == "ok" for r, _, _ in results)
    assert SlowLookup.peak == 3
    assert limiters.rows() == {"lookup_api": {"in_flight": 0, "limit": 3, "waiting": 0, "requests": 20}}
    # run.limits overrides the tool's default
    sized = Limiters({"lookup_api": 1})
    assert sized.get("lookup_api", 3).limit == 1
