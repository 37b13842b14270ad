"""Services tools share across a sweep (HTTP session, cache, limiters), started once, closed at the end.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fasteval.services.cache_http import response_cache
    from fasteval.services.limiters import Limiters
    from fasteval.services.registry import Closer, register_service, start_services

_WHERE = {
    "response_cache": "fasteval.services.cache_http",
    "Limiters": "fasteval.services.limiters",
    "Closer": "fasteval.services.registry",
    "register_service": "fasteval.services.registry",
    "start_services": "fasteval.services.registry",
}

__all__ = ["Closer", "Limiters", "register_service", "response_cache", "start_services"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'fasteval.services' has no attribute {name!r}")
