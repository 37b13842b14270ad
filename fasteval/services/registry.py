"""Shared resources that tools need (a sandbox pool, an HTTP session, a cache), started once per sweep.

A tool names the services it needs in ``Tool.requires``; the sweep starts only the services its
settings' tools require and closes them at the end. Like suites and tools, the registry knows each
built-in service by the module that defines it and imports that module only when a run needs the
service: nothing has to be imported first for its side effect.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fasteval.core.registry import LazyRegistry

Closer = Callable[[], Awaitable[None]]
ServiceFactory = Callable[[dict[str, Any]], Awaitable[tuple[Any, Closer]]]
"""Given the run section of the config, start the service; return it and its closer."""


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    start: ServiceFactory


SERVICES: LazyRegistry[Service] = LazyRegistry("service", {
    "cache": "fasteval.services.cache_http",
    "http": "fasteval.services.cache_http",
    "limiters": "fasteval.services.limiters",
    # A tool's own service lives with its tool; named here by module, imported only when started.
    "sandbox": "fasteval.tools.python_tools",
    "browser": "fasteval.tools.retrieval.page",
}, key=lambda s: s.name)


def register_service(name: str) -> Callable[[ServiceFactory], ServiceFactory]:
    """Decorator: ``factory`` starts the service ``name``."""
    def deco(factory: ServiceFactory) -> ServiceFactory:
        SERVICES.register(Service(name, factory))
        return factory
    return deco


async def start_services(names: set[str], run_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[Closer]]:
    services: dict[str, Any] = {}
    closers: list[Closer] = []
    for name in sorted(names):
        obj, closer = await SERVICES[name].start(run_cfg)  # an unknown name: KeyError naming the known ones
        services[name] = obj
        closers.append(closer)
    return services, closers
