"""The sim's server, batch APIs and Gemini batch mode see one another through protocols
(``providers/sim/batch_host.py``, as the native wires see ``SimCore``): none imports another only to
type it, so none needs an ``if TYPE_CHECKING:`` import (which hid a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import providers.sim

SIM = Path(providers.sim.__file__).parent


def type_checking_imports(path: Path) -> list[int]:
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]


def test_no_sim_module_imports_another_only_to_type_it() -> None:
    # The package face repeats its lazy names for the type checker (as providers/__init__ does):
    # it imports nothing at run time, so it hides no cycle.
    found = {p.name: lines for p in sorted(SIM.glob("*.py")) if p.name != "__init__.py"
             and (lines := type_checking_imports(p))}
    assert not found, found


def test_the_check_sees_a_type_checking_block(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n")
    assert type_checking_imports(planted) == [2]
