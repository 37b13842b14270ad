"""Who may read a viewer: the Host names it answers to, an optional token, and the headers that
keep its pages from being framed, sniffed or made to load anything from elsewhere.

A viewer on 127.0.0.1 is still reachable from a web page the user opens: DNS rebinding points an
attacker's name at 127.0.0.1, and the browser then sends the page's requests to the viewer with
``Host: attacker.example``. So a loopback viewer answers only to loopback names (plus those the
user adds with ``--allow-host``). A viewer bound to another address (``--host 0.0.0.0``) serves
every trajectory to whoever reaches the port, so it needs a token: given once as ``?token=…``
(answered by a redirect that drops it from the URL and sets an HttpOnly, SameSite=Strict
cookie), or as ``Authorization: Bearer …``. Tokens are compared in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache

from aiohttp import web

from fasteval.view.pages import asset, code_css, error_page

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
COOKIE = "fasteval_view_token"


def is_loopback(host: str) -> bool:
    """True for a bind address only this machine can reach (``localhost``, 127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Access:
    hosts: frozenset[str] | None = field(default=LOOPBACK_NAMES)
    """Host header names accepted (without the port); None accepts any (only with a token)."""
    token: str | None = None


ACCESS: web.AppKey[Access] = web.AppKey("access", Access)


def host_name(header: str) -> str:
    """The name in a Host header: ``[::1]:8765`` → ``::1``, ``Example:80`` → ``example``."""
    h = header.strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def _refuse(request: web.Request, status: int, msg: str) -> web.Response:
    if request.path.startswith("/api/"):
        return web.json_response({"error": msg}, status=status)
    return web.Response(text=error_page(status, msg), status=status, content_type="text/html")


def _presented(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[7:].strip()
    return request.query.get("token") or request.cookies.get(COOKIE)


@web.middleware
async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                ) -> web.StreamResponse:
    access = request.app[ACCESS]
    if access.hosts is not None and host_name(request.headers.get("Host", "")) not in access.hosts:
        return _refuse(request, 421, "this viewer does not answer to that Host name (a DNS rebinding guard); "
                                     "open it as http://127.0.0.1:<port>/ or start it with --allow-host NAME")
    if access.token is not None:
        given = _presented(request)
        if given is None or not hmac.compare_digest(given.encode(), access.token.encode()):
            return _refuse(request, 401, "this viewer needs its token: open the URL `fasteval view` printed "
                                         "(?token=…) or send Authorization: Bearer <token>")
        if "token" in request.query:  # keep the token out of the address bar, history and Referer
            query = {k: v for k, v in request.query.items() if k != "token"}
            target = str(request.rel_url.with_query(query))
            if not target.startswith("/") or target.startswith("//"):  # never a redirect to another host
                target = "/"
            resp = web.Response(status=303, headers={"Location": target})
            resp.set_cookie(COOKIE, access.token, httponly=True, samesite="Strict", path="/")
            return resp
    return await handler(request)


def _digest(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


@cache
def content_security_policy() -> str:
    """Nothing from anywhere else; only our own inline script and stylesheet, by hash."""
    script = _digest(asset("app.js"))
    style = _digest(f"{asset('style.css')}\n{code_css()}")
    return (f"default-src 'none'; script-src '{script}'; style-src '{style}'; img-src 'self' data:; "
            "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Content-Security-Policy"] = content_security_policy()
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cross-Origin-Resource-Policy"] = "same-origin"


