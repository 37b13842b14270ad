"""``fasteval tool run``: one tool call exactly as the agent loop makes it, for debugging and limits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.errors import BadInput
from fasteval.core.types import Task, Turn
from fasteval.engine.run.agent import AgentEnv, execute_tool
from fasteval.runfolder.blobs import BlobStore
from fasteval.runfolder.names import BLOBS
from fasteval.services.registry import start_services
from fasteval.tools.base import TOOLS, ToolContext, ToolResult, make_tool
from providers import EndpointDown, ToolCallRequest


def _store_inputs(images: list[Path], out: Path) -> tuple[BlobStore, list[str]]:
    for p in images:
        if not p.is_file():
            raise BadInput(f"image {p} does not exist")
    out.mkdir(parents=True, exist_ok=True)
    blobs = BlobStore(out / BLOBS)
    return blobs, [blobs.put(p.read_bytes()) for p in images]


async def run_tool_once(name: str, args: dict[str, Any], images: list[Path], fidelity: str, out: Path) -> dict[str, Any]:
    """Run ``name`` once; returns {status, output|error, images: [paths under out]}."""
    if name not in TOOLS:
        raise BadInput(f"unknown tool {name!r}; known tools: {sorted(TOOLS.names())}")
    blobs, refs = await asyncio.to_thread(_store_inputs, images, out)
    task = Task(id="tool-run", turns=[Turn(text="", images=refs)])
    tool = make_tool(name, fidelity=fidelity)
    services, closers = await start_services(set(getattr(TOOLS[name], "requires", ())), {})
    try:
        ctx = ToolContext(blobs=blobs, task=task, images=list(refs), fidelity=fidelity, session_id="tool-run",
                          services=services)
        env = AgentEnv(client=None, suite=None, setting=None, tools={name: tool}, blobs=blobs)  # type: ignore[arg-type]
        call = ToolCallRequest(id="cli", name=name, arguments=orjson.dumps(args).decode())
        try:
            result, _, latency = await execute_tool(call, env, ctx)
        except EndpointDown as e:  # in a sweep the job is left for a rerun; here, the call failed
            result, latency = ToolResult.fail(e.reason), 0.0
    finally:
        for closer in closers:
            await closer()
    saved = await asyncio.to_thread(_save_outputs, blobs, result.images, out)
    res: dict[str, Any] = {"tool": name, "status": result.status, "latency_s": round(latency, 4), "images": saved}
    if result.status == "ok":
        res["output"] = result.output
    else:
        res["error"] = result.error or result.output
    if result.extra:
        res["extra"] = result.extra
    return res


def _save_outputs(blobs: BlobStore, refs: list[str], out: Path) -> list[str]:
    saved = []
    for i, ref in enumerate(refs):
        data = blobs.get(ref)
        ext = ".png" if data[:4] == b"\x89PNG" else ".jpg" if data[:2] == b"\xff\xd8" else ".bin"
        dst = out / f"output_{i}{ext}"
        dst.write_bytes(data)
        saved.append(str(dst))
    return saved
