"""Reading one config file: YAML with bounds, duplicate keys refused, every key's line kept.

A config can come from anyone (a shared model list, a file mailed with a paper), so reading it
is bounded before anything walks it: PyYAML builds a "billion laughs" document (aliases of
aliases) as a small graph of shared objects, and the first walker that expands it (the secret
scan, the manifest's JSON, the config hash) runs out of time or memory. The composed node
graph is measured with each shared node counted once per use, without expanding it, and a file
past ``MAX_CONFIG_BYTES`` or ``MAX_NODES`` is refused. A key given twice in one mapping (PyYAML
silently keeps the last) is a config error with its line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fasteval.core.errors import ConfigError

KeyPath = tuple[str | int, ...]

MAX_CONFIG_BYTES = 1 << 20
"""A sweep config or model list is a few KB; 1 MiB is far past any real one (and reads in about a second)."""
MAX_NODES = 100_000
"""Values of a document with every alias expanded (a real config has hundreds)."""
_MERGE_TAG = "tag:yaml.org,2002:merge"


def expanded_size(root: yaml.Node, limit: int) -> int:
    """Nodes of ``root`` with every alias expanded, computed on the graph (memoised): stops past ``limit``."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:  # a recursive alias (PyYAML allows it): unbounded when expanded
            return limit + 1
        active.add(key)
        n = 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                n += size(k) + size(v)
                if n > limit:
                    break
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                n += size(item)
                if n > limit:
                    break
        active.discard(key)
        sizes[key] = n
        return n

    return size(root)


def duplicate_keys(root: yaml.Node) -> list[tuple[int, str]]:
    """(line, key) of every key given twice in one mapping, each node visited once."""
    out: list[tuple[int, str]] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE_TAG:
                    if k.value in keys:
                        out.append((k.start_mark.line + 1, str(k.value)))
                    keys.add(k.value)
                stack.extend((k, v))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return sorted(out)


def node_lines(root: yaml.Node | None) -> dict[KeyPath, int]:
    """The 1-based line of every mapping key and list item; a shared (aliased) node is walked once."""
    out: dict[KeyPath, int] = {}
    seen: set[int] = set()

    def walk(node: yaml.Node, path: KeyPath) -> None:
        out.setdefault(path, node.start_mark.line + 1)
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k.value)
                out[(*path, key)] = k.start_mark.line + 1
                walk(v, (*path, key))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i))

    if root is not None:
        walk(root, ())
    return out


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
            n = expanded_size(root, MAX_NODES)
            if n > MAX_NODES:
                raise ConfigError(f"{path}:{root.start_mark.line + 1}: the document expands to more than "
                                  f"{MAX_NODES:,} values (aliases of aliases?): refused")
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
