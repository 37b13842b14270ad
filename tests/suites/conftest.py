"""Fixture reference repositories for every suite test (texts: reference reads them).

Suites default ``reference_repo`` to ``data/reference/<repo>``; here the default points at
small synthetic copies with the reference layout (tests/suites/reference_repos.py), built once
per session, so tests of the ``reference`` fidelity read real files through the real loader.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import reference_repos  # noqa: E402


@pytest.fixture(scope="session")
def reference_repo_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reference")
    return {
        "tirbench": reference_repos.write_tirbench(root / "TIR-Bench"),
        "visualtoolbench": reference_repos.write_visualtoolbench(root / "VisualToolBench"),
        "vistahop": reference_repos.write_vistahop(root / "vistahop"),
    }


@pytest.fixture(autouse=True)
def _fixture_reference_repos(reference_repo_paths: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from fasteval.suites.tirbench import texts as tir
    from fasteval.suites.vistahop import texts as vh
    from fasteval.suites.visualtoolbench import texts as vtb

    monkeypatch.setattr(tir, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["tirbench"]))
    monkeypatch.setattr(vtb, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["visualtoolbench"]))
    monkeypatch.setattr(vh, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["vistahop"]))
    yield
