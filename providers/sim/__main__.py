"""Run the sim server as its own process: ``python -m providers.sim --port P --model NAME:POLICY``.

Used by benchmarks so the model's CPU is not charged to the client under test.
"""

from __future__ import annotations

import argparse
import asyncio

import orjson
import uvloop

from providers.sim.server import SimServer
from providers.sim.spec import SimModel


async def _serve(models: list[SimModel], port: int, allowed_local_media_path: str | None) -> None:
    server = SimServer(models, port=port, allowed_local_media_path=allowed_local_media_path)
    await server.start()
    print(orjson.dumps({"port": server.port}).decode(), flush=True)
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m providers.sim")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model", action="append", default=[], help="NAME[:POLICY]")
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--tool-uses", type=int, default=2)
    ap.add_argument("--allowed-local-media-path", default=None,
                    help="serve file:// images from under this folder (as vLLM's option of that name)")
    a = ap.parse_args()
    models = []
    for spec in a.model or ["sim"]:
        name, _, policy = spec.partition(":")
        models.append(SimModel(name=name, policy=policy or "tools", latency_ms=a.latency_ms, tool_uses=a.tool_uses))
    uvloop.run(_serve(models, a.port, a.allowed_local_media_path))


if __name__ == "__main__":
    main()
