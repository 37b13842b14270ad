"""YAML read with bounds: aliases measured without expanding them, duplicate keys found, lines kept.

PyYAML builds a "billion laughs" document (aliases of aliases) as a small graph of shared
objects; the first walker that expands it (a secret scan, a JSON dump, a hash) runs out of time
or memory. These helpers work on the composed node graph, each shared node visited once, so
a config or a reference file can be measured and refused before anything expands it.
"""

from __future__ import annotations

from typing import Any

import yaml

KeyPath = tuple[str | int, ...]
MAX_NODES = 100_000
"""Values of a document with every alias expanded (a real config or prompt file has hundreds)."""
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


def load_bounded(text: str, max_nodes: int = MAX_NODES) -> tuple[Any, yaml.Node | None]:
    """The document of ``text`` and its root node; ValueError when it expands past ``max_nodes``."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        if expanded_size(root, max_nodes) > max_nodes:
            raise ValueError(f"line {root.start_mark.line + 1}: the document expands to more than "
                             f"{max_nodes:,} values (aliases of aliases?): refused")
        return loader.construct_document(root), root
    finally:
        loader.dispose()
