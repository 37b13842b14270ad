"""An OpenAI-compatible chat endpoint (POST /v1/chat/completions, GET /v1/models, as in OpenAI's
API reference) whose every word is hostile: answers, tool names, tool arguments and error bodies
carry Rich markup, OSC 8 links, OSC 52 clipboard writes, a title change and a screen clear.

A user message holding ``ERROR-ROW`` gets a 400 with the hostile body (a fatal error record),
``TOOL-ROW`` a tool call by a hostile name, anything else a hostile answer; with ``--auth`` every
request gets a 401 with that body (the endpoint goes down). Run as ``python hostile_endpoint.py
[--auth]``: it prints its port on the first line of stdout and serves until killed.
"""

from __future__ import annotations

import socket
import sys
import time

import orjson
from aiohttp import web

HOSTILE = ("[/bogus] [link=http://evil.example/]click me[/link] [bold red]x\x1b]0;pwned-title\x07"
           "\x1b[2J\x1b]52;c;cHduZWQ=\x07\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\\x9b31m\u202eevil")
TOOL_NAME = "[/x]tool\x1b]0;t\x07"


def _reply(message: dict[str, object], finish: str) -> web.Response:
    body = {"id": "chatcmpl-hostile", "object": "chat.completion", "created": int(time.time()), "model": "hostile",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _error(status: int) -> web.Response:
    body = {"error": {"message": HOSTILE, "type": "invalid_request_error", "code": HOSTILE}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


def make_app(auth_fails: bool) -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        if auth_fails:
            return _error(401)
        req = await request.json()
        messages = req.get("messages") or []
        text = orjson.dumps([m.get("content") for m in messages if m.get("role") == "user"]).decode()
        if "ERROR-ROW" in text:
            return _error(400)
        if "TOOL-ROW" in text and messages[-1].get("role") == "user":
            call = {"id": "call_1", "type": "function",
                    "function": {"name": TOOL_NAME, "arguments": orjson.dumps({"code": HOSTILE}).decode()}}
            return _reply({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
        return _reply({"role": "assistant", "content": HOSTILE}, "stop")

    async def models(request: web.Request) -> web.Response:
        if auth_fails:
            return _error(401)
        return web.Response(body=orjson.dumps({"object": "list", "data": [{"id": "hostile", "object": "model"}]}),
                            content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    web.run_app(make_app("--auth" in sys.argv), sock=sock, print=None)


if __name__ == "__main__":
    main()
