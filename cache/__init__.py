"""Content-addressed SQLite cache for tool results, verdicts and (opt-in) model turns.

Users see ``cache.Cache`` and friends; the modules behind them are private.
"""

from cache._cache import DEFAULT_MODES, MODES, NAMESPACES, Cache, CacheMiss, Mode, parse_modes
from cache._keys import SCHEMA_VERSION, TRANSPORT_FIELDS, cache_key, canonical_params, chat_key
from cache._store import CacheValue, EmptyValueError, NamespaceStats, default_cache_path
from cache._transfer import cache_stats, export_cache, import_cache, prune_cache, read_key_list

__all__ = [
    "DEFAULT_MODES",
    "MODES",
    "NAMESPACES",
    "SCHEMA_VERSION",
    "TRANSPORT_FIELDS",
    "Cache",
    "CacheMiss",
    "CacheValue",
    "EmptyValueError",
    "Mode",
    "NamespaceStats",
    "cache_key",
    "cache_stats",
    "canonical_params",
    "chat_key",
    "default_cache_path",
    "export_cache",
    "import_cache",
    "parse_modes",
    "prune_cache",
    "read_key_list",
]
