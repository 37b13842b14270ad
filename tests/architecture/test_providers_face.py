"""The layers above ``providers/`` import it through its face (``providers/__init__.py``), never a module.

``from providers import ModelClient``, not ``from providers.client import ModelClient``: what the
package offers is listed once, a module can move inside it without an edit elsewhere, and the face
loads each name's module on first use, so naming one provider fact never imports aiohttp. Imports
are read with ``ast``, lazy ones and ``if TYPE_CHECKING:`` ones included (a type's home is named
there too). Inside ``providers/`` modules import each other directly.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import providers

ROOT = Path(__file__).resolve().parents[2]
ABOVE = ("fasteval", "sandbox", "cache")


def imports_past_the_face(root: Path = ROOT) -> list[str]:
    """``file:line: module`` for each import, outside ``providers/``, of a module inside it."""
    bad = []
    for pkg in ABOVE:
        for path in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    named = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    named = [node.module]
                else:
                    continue
                bad += [f"{path.relative_to(root)}:{node.lineno}: {m}" for m in named if m.startswith("providers.")]
    return bad


def test_the_other_layers_import_providers_through_its_face() -> None:
    bad = imports_past_the_face()
    assert not bad, ("imports of a providers module past its face (import the name from `providers`, and add "
                     "it to providers/__init__.py if it is not there):\n" + "\n".join(bad))


def test_a_planted_import_past_the_face_is_named_with_file_and_line(tmp_path: Path) -> None:
    files = {"fasteval/engine/run/clients.py": "from providers import ModelClient\n"
                                               "def f():\n    from providers.client import ModelClient\n",
             "fasteval/view/report.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    import providers.registry\n",
             "cache/store.py": "import providers\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert imports_past_the_face(tmp_path) == ["fasteval/engine/run/clients.py:3: providers.client",
                                               "fasteval/view/report.py:3: providers.registry"]


def test_the_face_serves_every_name_it_lists_and_types_each() -> None:
    """Its table and its ``TYPE_CHECKING`` imports (``name as name``, which mypy reads as re-exports) agree."""
    tree = ast.parse(Path(providers.__file__).read_text())
    typed = {a.asname for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
             and node.module.startswith("providers.") for a in node.names if a.asname == a.name}
    assert typed == set(providers.__all__)
    for name in providers.__all__:
        assert getattr(providers, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = providers.nothing


def test_naming_a_provider_fact_imports_no_wire_and_no_aiohttp() -> None:
    code = ("import sys; from providers import ProviderKind, providers, price_terms; providers(); "
            "print(sorted(m for m in ('aiohttp', 'providers.client', 'providers.openai_compat', 'providers.sim') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
