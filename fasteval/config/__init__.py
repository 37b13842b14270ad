"""Sweep configs: load, validate (file:line, did-you-mean) and hash them.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:
    from fasteval.config.endpoint import EndpointSpec
    from fasteval.config.load import SweepConfig, config_hash, load_config
    from fasteval.config.run import RunSettings
    from fasteval.config.schema import config_json_schema
    from fasteval.core.errors import ConfigError

__getattr__, __all__ = lazy_face("fasteval.config", {
    "fasteval.core.errors": ("ConfigError",),
    "endpoint": ("EndpointSpec",),
    "load": ("SweepConfig", "config_hash", "load_config"),
    "run": ("RunSettings",),
    "schema": ("config_json_schema",),
})
