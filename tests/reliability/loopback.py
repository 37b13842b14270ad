"""A real aiohttp server on 127.0.0.1 for the reliability tests' hostile upstreams and judges.

Each test subclass writes only ``handle``: the server takes every method and path, binds a free
port, and says where it listens in ``url``, so no two tests carry their own copy of the set-up.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from aiohttp import web


class LoopbackServer(ABC):
    """Routes every request to ``handle``; ``start`` binds a free port, ``stop`` frees it."""

    def __init__(self) -> None:
        self.runner: web.AppRunner | None = None
        self.url = ""

    @abstractmethod
    async def handle(self, request: web.Request) -> web.Response:
        """The test's answer to one request."""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
