"""Sweep configs: load, validate (file:line, did-you-mean) and hash them.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fasteval.config.load import SweepConfig, config_hash, load_config
    from fasteval.config.schema import config_json_schema
    from fasteval.core.errors import ConfigError

_WHERE = {
    "ConfigError": "fasteval.core.errors",
    "SweepConfig": "fasteval.config.load",
    "config_hash": "fasteval.config.load",
    "load_config": "fasteval.config.load",
    "config_json_schema": "fasteval.config.schema",
}

__all__ = ["ConfigError", "SweepConfig", "config_hash", "config_json_schema", "load_config"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'fasteval.config' has no attribute {name!r}")
