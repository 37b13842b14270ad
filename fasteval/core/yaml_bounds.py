"""YAML read with bounds: aliases measured (values and text) without expanding them, duplicate keys found, lines kept.

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
MAX_EXPANDED_CHARS = 4 << 20
"""Characters of text of a document with every alias expanded (configs and prompt files hold
kilobytes; a 1 MiB file without aliases stays under it)."""
_MERGE_TAG = "tag:yaml.org,2002:merge"


def expanded_cost(root: yaml.Node, max_nodes: int, max_chars: int) -> tuple[int, int]:
    """Nodes and characters of scalar text in ``root`` with every alias expanded, computed on the
    graph (each shared node measured once): stops once either passes its limit.

    Nodes alone miss the cheap bomb: one 800 KB string aliased a thousand times is 1,001 values
    but 800 MB of text once a walker (the manifest's JSON, the secret scan) expands it."""
    sizes: dict[int, tuple[int, int]] = {}
    active: set[int] = set()

    def cost(node: yaml.Node) -> tuple[int, int]:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:  # a recursive alias (PyYAML allows it): unbounded when expanded
            return max_nodes + 1, max_chars + 1
        active.add(key)
        n, chars = 1, 0
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [x for pair in node.value for x in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.ScalarNode):
            chars = len(node.value)
        for child in children:
            dn, dc = cost(child)
            n, chars = n + dn, chars + dc
            if n > max_nodes or chars > max_chars:
                break
        active.discard(key)
        sizes[key] = (n, chars)
        return n, chars

    return cost(root)


def expansion_problem(root: yaml.Node, max_nodes: int = MAX_NODES, max_chars: int = MAX_EXPANDED_CHARS) -> str | None:
    """Why ``root`` is refused before anything expands it (from its line on), or None when it is fine."""
    n, chars = expanded_cost(root, max_nodes, max_chars)
    where = f"line {root.start_mark.line + 1}: the document expands to more than "
    if n > max_nodes:
        return where + f"{max_nodes:,} values (aliases of aliases?): refused"
    if chars > max_chars:
        return where + f"{max_chars:,} characters of text (a long string aliased many times?): refused"
    return None


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
    """The document of ``text`` and its root node; ValueError when it expands past ``max_nodes``
    values or ``MAX_EXPANDED_CHARS`` characters of text."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        problem = expansion_problem(root, max_nodes)
        if problem:
            raise ValueError(problem)
        return loader.construct_document(root), root
    finally:
        loader.dispose()
