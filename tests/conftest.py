"""Session-wide isolation: no test may touch the user's shared cache in ~/.cache/fasteval."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("fasteval-cache")
    monkeypatch.setenv("FASTEVAL_CACHE_DIR", str(path))
    monkeypatch.delenv("FASTEVAL_STORE", raising=False)  # a developer's team store never gets test records
    yield path


# Reference texts: suites default ``reference_repo`` to ``data/reference/<repo>``; every test gets
# small synthetic copies with the reference layout instead (tests/reference_repos.py), built once
# per session, so ``fidelity: reference`` reads real files through the real loader anywhere.
# Loaded by path and registered by name (adding tests/ to sys.path would shadow the packages).
_spec = importlib.util.spec_from_file_location("reference_repos", Path(__file__).parent / "reference_repos.py")
assert _spec is not None and _spec.loader is not None
reference_repos = importlib.util.module_from_spec(_spec)
sys.modules["reference_repos"] = reference_repos
_spec.loader.exec_module(reference_repos)


@pytest.fixture(scope="session")
def reference_repo_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reference")
    return {
        "tirbench": reference_repos.write_tirbench(root / "TIR-Bench"),
        "visualtoolbench": reference_repos.write_visualtoolbench(root / "VisualToolBench"),
        "vistahop": reference_repos.write_vistahop(root / "vistahop"),
        "vlmevalkit": reference_repos.write_vlmevalkit(root / "VLMEvalKit"),
        "mini-o3": reference_repos.write_mini_o3(root / "Mini-o3"),
        "deepeyes": reference_repos.write_deepeyes(root / "DeepEyes"),
        "treevgr": reference_repos.write_treevgr(root / "TreeVGR"),
        "lmms-eval": reference_repos.write_lmms_eval(root / "lmms-eval"),
    }


@pytest.fixture(autouse=True)
def _fixture_reference_repos(reference_repo_paths: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from fasteval.suites.mcq import judge as mcq_judge
    from fasteval.suites.tirbench import texts as tir
    from fasteval.suites.treebench import treevgr_prompt
    from fasteval.suites.vistahop import texts as vh
    from fasteval.suites.visualprobe import judge as probe_judge
    from fasteval.suites.visualtoolbench import texts as vtb
    from fasteval.suites.vstar import deepeyes, lmms_eval_prompt

    monkeypatch.setattr(tir, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["tirbench"]))
    monkeypatch.setattr(vtb, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["visualtoolbench"]))
    monkeypatch.setattr(vh, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["vistahop"]))
    monkeypatch.setattr(mcq_judge, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["vlmevalkit"]))
    monkeypatch.setattr(probe_judge, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["mini-o3"]))
    monkeypatch.setattr(deepeyes, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["deepeyes"]))
    monkeypatch.setattr(lmms_eval_prompt, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["lmms-eval"]))
    monkeypatch.setattr(treevgr_prompt, "DEFAULT_REFERENCE_REPO", str(reference_repo_paths["treevgr"]))


@pytest.fixture(autouse=True)
def _sdk_checked_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Every sim a test starts has its requests and replies checked by the vendors' SDK types
    (tests/providers/wire_types.py): a sim-backed test fails on a body the real API would not know."""
    from tests.providers.wire_types import SdkCheck

    check = SdkCheck()
    check.install(monkeypatch)
    yield check
    check.assert_clean()
