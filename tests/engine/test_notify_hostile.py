"""``notify:`` against receivers that misbehave: one that redirects the event to another origin, one
that never answers in time. Real loopback HTTP servers, real sim sweeps through the real CLI."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.engine.test_notify import run, write_config

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Server:
    """An aiohttp server on 127.0.0.1 in its own thread, counting the POSTs it gets."""

    def __init__(self, handler: Handler) -> None:
        self.posts = 0
        self.handler = handler
        self.loop = asyncio.new_event_loop()
        self.port = 0
        started = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)

    def _serve(self, started: threading.Event) -> None:
        async def hook(request: web.Request) -> web.StreamResponse:
            await request.read()
            self.posts += 1
            return await self.handler(request)

        async def start() -> web.AppRunner:
            app = web.Application()
            app.router.add_post("/hook", hook)
            runner = web.AppRunner(app, shutdown_timeout=0.1)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = runner.addresses[0][1]
            return runner

        asyncio.set_event_loop(self.loop)
        self.runner = self.loop.run_until_complete(start())
        started.set()
        self.loop.run_forever()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for s in made:
        s.close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_says_so_in_run_log(tmp_path: Path, servers: list[Server],
                                                           status: int) -> None:
    elsewhere = Server(lambda _: _ok())
    servers.append(elsewhere)

    async def redirect(_: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": elsewhere.url})

    first = Server(redirect)
    servers.append(first)
    config = write_config(tmp_path, {"url": first.url, "timeout_s": 5})
    assert run(tmp_path, config) == 0
    assert first.posts == 1 and elsewhere.posts == 0  # the event never reached the other origin
    log = (tmp_path / "run" / "run.log").read_text()
    assert f"notify: the URL answered HTTP {status} (a redirect, not followed" in log
    assert str(elsewhere.port) not in log and str(first.port) not in log  # the address stays out


def test_a_notify_that_times_out_after_the_sweep_leaves_a_line_in_run_log(tmp_path: Path,
                                                                         servers: list[Server]) -> None:
    async def slow(_: web.Request) -> web.StreamResponse:
        await asyncio.sleep(5)
        return await _ok()

    receiver = Server(slow)
    servers.append(receiver)
    config = write_config(tmp_path, {"url": receiver.url, "timeout_s": 0.5})
    assert run(tmp_path, config) == 0  # a notifier never changes the outcome
    log = (tmp_path / "run" / "run.log").read_text()
    assert "notify: POST failed: no answer within 0.5 s" in log.splitlines()[-1]
    assert receiver.posts == 1


async def _ok() -> web.StreamResponse:
    return web.json_response({"ok": True})
