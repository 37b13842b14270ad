"""Every provider fact lives in its registry entry (``providers/registry.py``), nowhere else.

A provider's wire, config keys, capabilities, batch API and batch price are fields of its
``ProviderKind`` (and its wire's ``WireKind``); everyone else asks the entry. So the source is
read with ``ast`` for the ways a fact escapes the table:

- outside ``providers/``, a provider's or a wire's name at all (``if ep.provider == "vllm"``,
  ``BATCH_FACTORS = {"openai": 0.5}``): no module outside ``providers/`` names a provider;
- inside ``providers/``, a name compared, used as a key, or listed beside another
  (``BATCH_PROVIDERS = frozenset({"openai", "sim"})``), and a provider told apart by its class
  (``isinstance(p, AnthropicProvider)`` outside that class's module: the old ``wire_for`` chain).

A wire module may hold its own name as a value (``NATIVE = "anthropic"``, a batch wire's ``name``),
and ``providers/sim/`` is exempt: it is the far side of every wire, a server answering each
vendor's API by its dialect, not a client choosing between providers. Docstrings are prose.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from providers.registry import WIRES, providers

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fasteval", "providers", "sandbox", "cache")
TABLE = Path("providers/registry.py")
SERVER = Path("providers/sim")
NAMES = frozenset(providers()) | frozenset(WIRES)


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the string constants that are docstrings (a module's, a class's, a function's, an attribute's)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                out.add(id(stmt.value))
    return out


def _name(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES \
        else None


def _named_in(node: ast.AST) -> list[str]:
    """The provider names a comparison operand holds: itself, or the members of a literal collection."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [n for e in node.elts if (n := _name(e))]
    one = _name(node)
    return [one] if one else []


def provider_classes(root: Path) -> dict[str, Path]:
    """Each concrete provider class (a subclass of ``Provider``, however deep) and the file defining it."""
    bases: dict[str, tuple[set[str], Path]] = {}
    for path in sorted((root / "providers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = ({ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}, path)
    found: dict[str, Path] = {}
    grew = True
    while grew:
        grew = False
        for name, (parents, path) in bases.items():
            if name not in found and parents & ({"Provider"} | set(found)):
                found[name] = path
                grew = True
    return found


def _facts_in(path: Path, root: Path, classes: dict[str, Path]) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(root)
    outside = rel.parts[0] != "providers"
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        if outside:
            if (n := _name(node)) and id(node) not in prose:
                yield node.lineno, f"names the provider or wire {n!r} outside providers/"
            continue
        if isinstance(node, ast.Compare):
            for n in sorted({n for operand in (node.left, *node.comparators) for n in _named_in(operand)}):
                yield node.lineno, f"compares a provider or wire name ({n!r})"
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None and (n := _name(key)):
                    yield key.lineno, f"keys a table by a provider or wire name ({n!r})"
        elif isinstance(node, ast.Subscript) and (n := _name(node.slice)):
            yield node.lineno, f"looks a provider or wire name up ({n!r})"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and (n := _name(node.args[0])):
            yield node.lineno, f"looks a provider or wire name up ({n!r})"
        elif isinstance(node, ast.Tuple | ast.List | ast.Set) and len(names := _named_in(node)) > 1:
            yield node.lineno, f"lists provider or wire names ({', '.join(map(repr, names))})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and len(node.args) == 2:
            told = [e for e in (node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]])
                    if isinstance(e, ast.Name) and e.id in classes and classes[e.id] != path]
            for cls in told:
                yield node.lineno, f"tells a provider apart by its class ({cls.id})"


def provider_facts_outside_the_table(root: Path = ROOT) -> list[str]:
    """``file:line: what`` for each provider fact found outside its registry entry."""
    classes = provider_classes(root)
    bad = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root)
            if rel == TABLE or rel.is_relative_to(SERVER):
                continue
            bad += [f"{rel}:{line}: {what}" for line, what in _facts_in(path, root, classes)]
    return bad


def test_no_provider_fact_lives_outside_its_registry_entry() -> None:
    bad = provider_facts_outside_the_table()
    assert not bad, ("provider facts outside providers/registry.py (make them a field of the ProviderKind "
                     "or WireKind, and ask the entry):\n" + "\n".join(bad))


def test_every_batch_provider_has_a_wire_with_a_batch_api() -> None:
    """A provider with a batch price has a batch API to spend it on, on its own wire."""
    for kind in providers().values():
        if kind.batch_factor is not None:
            assert kind.batch_wire(kind.wire) is not None, kind.name
            assert 0 < kind.batch_factor <= 1, kind.name


_BASE = "class Provider:\n    pass\n"
_WIRE = "from providers.base import Provider\n\nclass AnthropicProvider(Provider):\n    pass\n"


def _planted(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in {"providers/base.py": _BASE, "providers/anthropic.py": _WIRE, **files}.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


@pytest.mark.parametrize(("files", "expect"), [
    ({"fasteval/core/pricing.py": 'BATCH_FACTORS = {"openai": 0.5, "gemini": 0.5}\n'},
     "fasteval/core/pricing.py:1: names the provider or wire 'openai' outside providers/"),
    ({"fasteval/engine/run/clients.py": 'def f(ep):\n    if ep.provider == "vllm":\n        return 1\n'},
     "fasteval/engine/run/clients.py:2: names the provider or wire 'vllm'"),
    ({"providers/batch/wires.py": 'BATCH_PROVIDERS = frozenset({"openai", "sim"})\n'},
     "providers/batch/wires.py:1: lists provider or wire names ('openai', 'sim')"),
    ({"providers/batch/wires.py": "from providers.anthropic import AnthropicProvider\n\n"
                                  "def wire_for(p):\n    if isinstance(p, AnthropicProvider):\n        return 1\n"},
     "providers/batch/wires.py:4: tells a provider apart by its class (AnthropicProvider)"),
    ({"providers/client.py": 'def served(kind):\n    return kind.name in ("vllm", "sglang")\n'},
     "providers/client.py:2: compares a provider or wire name ('sglang')"),
    ({"providers/token_rules.py": '_BY_WIRE = {"gemini": 1}\n'},
     "providers/token_rules.py:1: keys a table by a provider or wire name ('gemini')"),
])
def test_a_planted_provider_fact_is_named_with_file_and_line(tmp_path: Path, files: dict[str, str],
                                                             expect: str) -> None:
    bad = provider_facts_outside_the_table(_planted(tmp_path, files))
    assert any(line.startswith(expect) for line in bad), bad


def test_the_table_itself_a_wire_naming_itself_the_sim_and_prose_are_not_facts(tmp_path: Path) -> None:
    root = _planted(tmp_path, {
        "providers/registry.py": 'BATCH = {"openai": 0.5}\nif x == "vllm":\n    pass\n',
        "providers/anthropic.py": _WIRE + 'NATIVE = "anthropic"\n\ndef f(p):\n    return isinstance(p, AnthropicProvider)\n',
        "providers/sim/batch_api.py": 'def f(b):\n    return b.dialect == "openai"\n',
        "fasteval/engine/plan.py": '"""Runs on vllm and "openai"."""\n\ndef f():\n    """Not "sim"."""\n',
    })
    assert provider_facts_outside_the_table(root) == []
