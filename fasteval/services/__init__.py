"""Services tools share across a sweep (HTTP session, cache, limiters), started once, closed at the end.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:
    from fasteval.services.cache_http import response_cache
    from fasteval.services.limiters import Limiters
    from fasteval.services.registry import SERVICES, Closer, register_service, start_services

__getattr__, __all__ = lazy_face("fasteval.services", {
    "cache_http": ("response_cache",),
    "limiters": ("Limiters",),
    "registry": ("SERVICES", "Closer", "register_service", "start_services"),
})
