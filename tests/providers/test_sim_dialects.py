"""The sim's wire dialects depend on the small SimCore protocol, never on the server module."""

from __future__ import annotations

import ast
from pathlib import Path

import providers.sim

SIM = Path(providers.sim.__file__).parent
DIALECTS = ("native_wire.py", "responses_wire.py", "anthropic_api.py", "gemini_api.py", "responses_api.py", "wire.py")


def test_dialects_never_import_the_server_or_call_its_private_parts() -> None:
    for name in DIALECTS:
        tree = ast.parse((SIM / name).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
            {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert "providers.sim.server" not in imported, name
        private = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("_")
                   and isinstance(n.value, ast.Attribute) and n.value.attr == "core"]
        assert not private, (name, private)


def test_the_server_is_a_sim_core() -> None:
    from providers.sim.server import SimServer
    from providers.sim.wire import SimCore

    server: SimCore = SimServer([])  # mypy checks the protocol; this checks the attributes exist
    assert callable(server.answer) and server.models == {} and server.api_keys == {}
