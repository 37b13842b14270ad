"""``fasteval data fetch`` for the five suites: without huggingface_hub each names its dataset and
where the files go; VisualProbe's three level datasets land where the loader reads them."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import releases as rel

from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import SUITES, make_suite
from fasteval.suites.data_fetch import DATASETS, REFERENCE_REPOS, FetchError, fetch, source


@pytest.mark.parametrize(("name", "repo"), [
    ("vstar", "craigwu/vstar_bench"), ("hrbench", "DreamMr/HR-Bench"), ("mme-realworld", "yifanzhang114/MME-RealWorld"),
    ("treebench", "HaochenWang/TreeBench"), ("visualprobe", "Mini-o3/VisualProbe_"),
])
def test_offline_fetch_says_which_dataset_and_where(name: str, repo: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert name in DATASETS and name in SUITES
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(FetchError) as e:
        fetch(name, tmp_path / "dest")
    assert repo in str(e.value) and str(tmp_path / "dest") in str(e.value)


def test_aliases_and_reference_checkouts() -> None:
    assert source("V*").name == "vstar" and source("HR-Bench").name == "hrbench"
    assert REFERENCE_REPOS["vlmevalkit-reference"].commit.startswith("e8e78f05")
    assert REFERENCE_REPOS["mini-o3-reference"].commit.startswith("8654dbf4")


def test_visualprobe_fetches_each_level_into_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def snapshot_download(**kwargs: Any) -> str:
        calls.append(kwargs)
        level = kwargs["repo_id"].rsplit("_", 1)[-1]
        local = Path(kwargs["local_dir"])
        (local / "data").mkdir(parents=True, exist_ok=True)
        (local / "data" / "1.jpg").write_bytes(rel.jpeg())
        row = {"images": [f"VisualProbe_{level}/data/1.jpg"], "doc_id": 1, "problem": "<image>\nWhat?",
               "solution": "x", "data_source": f"visual_probe_{level.lower()}"}
        (local / "val.json").write_text(json.dumps([row]))
        return str(local)

    module = types.ModuleType("huggingface_hub")
    module.snapshot_download = snapshot_download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    path = fetch("visualprobe", tmp_path / "VisualProbe")
    assert [Path(c["local_dir"]).name for c in calls] == ["VisualProbe_Easy", "VisualProbe_Medium", "VisualProbe_Hard"]
    suite = make_suite("visualprobe", {"path": str(path)}, BlobStore(tmp_path / "blobs"))
    assert [getattr(t, "id", None) for t in suite.load()] == [
        "visual_probe_easy/1", "visual_probe_medium/1", "visual_probe_hard/1"]
