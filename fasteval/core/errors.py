"""Errors that cross layers live in this leaf, so raising one never imports the module that handles it.

A suite's reference-text loader or a tool's option check raises ``ConfigError`` without pulling in
the config loader (which imports the suites and tools: a cycle, before this module existed).
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config that cannot run; ``problems`` holds one line per problem (file:line: key.path: message)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]
