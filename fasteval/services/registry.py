"""Shared resources that tools need (a sandbox pool, an HTTP session, a cache), started once per sweep.

A tool names the services it needs in ``Tool.requires``; a service module registers a factory
here. The sweep starts only the services its settings' tools require and closes them at the end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Closer = Callable[[], Awaitable[None]]
ServiceFactory = Callable[[dict[str, Any]], Awaitable[tuple[Any, Closer]]]
"""Given the run section of the config, start the service; return it and its closer."""

SERVICES: dict[str, ServiceFactory] = {}


def register_service(name: str) -> Callable[[ServiceFactory], ServiceFactory]:
    def deco(factory: ServiceFactory) -> ServiceFactory:
        SERVICES[name] = factory
        return factory
    return deco


async def start_services(names: set[str], run_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[Closer]]:
    services: dict[str, Any] = {}
    closers: list[Closer] = []
    for name in sorted(names):
        if name not in SERVICES:
            raise KeyError(f"no service named {name!r} is registered (known: {sorted(SERVICES)})")
        obj, closer = await SERVICES[name](run_cfg)
        services[name] = obj
        closers.append(closer)
    return services, closers
