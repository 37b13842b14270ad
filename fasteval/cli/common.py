"""Small printing helpers every command shares."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import orjson
from rich.console import Console

if TYPE_CHECKING:
    from fasteval.core.errors import ConfigError


def print_json(obj: Any) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")


def print_config_error(e: ConfigError) -> None:
    for line in str(e).splitlines():
        print(f"error: {line.strip()}" if not line.startswith("  ") else line, file=sys.stderr)


def console() -> Console:
    """Wide enough for the report table even when stdout is a pipe or a CI log."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def fmt(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}" if pct else f"{x:.3f}"
