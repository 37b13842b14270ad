"""Reading one config file: YAML with bounds, duplicate keys refused, every key's line kept.

A config can come from anyone (a shared model list, a file mailed with a paper), so reading it
is bounded before anything walks it: PyYAML builds a "billion laughs" document (aliases of
aliases) as a small graph of shared objects, and the first walker that expands it (the secret
scan, the manifest's JSON, the config hash) runs out of time or memory. The composed node
graph is measured without expanding it (``fasteval.core.yaml_bounds``), and a file past
``MAX_CONFIG_BYTES``, or one that expands past ``MAX_NODES`` values or ``MAX_EXPANDED_CHARS``
characters of text (one long string aliased a thousand times), is refused. A key given twice in one mapping (PyYAML
silently keeps the last) is a config error with its line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fasteval.core.errors import ConfigError
from fasteval.core.yaml_bounds import KeyPath, duplicate_keys, expansion_problem, node_lines

MAX_CONFIG_BYTES = 1 << 20
"""A sweep config or model list is a few KB; 1 MiB is far past any real one (and reads in about a second)."""


def read_yaml(path: Path) -> tuple[Any, dict[KeyPath, int]]:
    """The document of a config file and its line map; ConfigError (file:line) for what we refuse."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes is too large for a config (at most {MAX_CONFIG_BYTES:,})")
        text = path.read_text()
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return None, {}
            problem = expansion_problem(root)
            if problem:
                raise ConfigError(f"{path}:{problem.removeprefix('line ')}")
            dupes = duplicate_keys(root)
            if dupes:
                raise ConfigError(f"{path}: {len(dupes)} problem{'s' if len(dupes) > 1 else ''}:\n  " + "\n  ".join(
                    f"{path}:{line}: key {key!r} is given twice in one mapping (YAML would keep only the last)"
                    for line, key in dupes), [f"{path}:{line}: key {key!r} is given twice in one mapping"
                                               for line, key in dupes])
            data = loader.construct_document(root)
            lines = node_lines(root)
        finally:
            loader.dispose()
    except (OSError, yaml.YAMLError, UnicodeDecodeError, RecursionError) as e:
        reason = str(e).replace("\n", " ") if not isinstance(e, RecursionError) else "nested too deeply"
        raise ConfigError(f"cannot read config {path}: {reason}") from None
    return data, lines
