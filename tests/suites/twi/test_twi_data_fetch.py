"""``fasteval data fetch`` for the five suites: without a hub each names its dataset and where the
files go; VisualProbe's three level datasets land where the loader reads them, from a loopback hub."""

from __future__ import annotations

import json
from pathlib import Path

import hub_server
import pytest
import releases as rel

from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import SUITES, make_suite
from fasteval.suites.data_fetch import DATASETS, REFERENCE_REPOS, FetchError, fetch, source
from fasteval.suites.hub.lock import read_lock


@pytest.mark.parametrize(("name", "repo"), [
    ("vstar", "craigwu/vstar_bench"), ("hrbench", "DreamMr/HR-Bench"), ("mme-realworld", "yifanzhang114/MME-RealWorld"),
    ("treebench", "HaochenWang/TreeBench"), ("visualprobe", "Mini-o3/VisualProbe_"),
])
def test_offline_fetch_says_which_dataset_and_where(name: str, repo: str, tmp_path: Path) -> None:
    assert name in DATASETS and name in SUITES
    with pytest.raises(FetchError) as e:  # HF_ENDPOINT points at a port nothing listens on
        fetch(name, tmp_path / "dest")
    assert repo in str(e.value) and str(tmp_path / "dest") in str(e.value) and "cannot reach" in str(e.value)


def test_aliases_and_reference_checkouts() -> None:
    assert source("V*").name == "vstar" and source("HR-Bench").name == "hrbench"
    assert REFERENCE_REPOS["vlmevalkit-reference"].commit.startswith("e8e78f05")
    assert REFERENCE_REPOS["mini-o3-reference"].commit.startswith("8654dbf4")


def test_visualprobe_fetches_each_level_into_its_folder(tmp_path: Path, fake_hub: hub_server.FakeHub) -> None:
    for level in ("Easy", "Medium", "Hard"):
        row = {"images": [f"VisualProbe_{level}/data/1.jpg"], "doc_id": 1, "problem": "<image>\nWhat?",
               "solution": "x", "data_source": f"visual_probe_{level.lower()}"}
        fake_hub.add_dataset(f"Mini-o3/VisualProbe_{level}", {
            "val.json": json.dumps([row]).encode(), "data/1.jpg": rel.jpeg(), "README.md": b"not fetched"})
    path = fetch("visualprobe", tmp_path / "VisualProbe")
    assert sorted(p.name for p in path.iterdir() if p.is_dir()) == [
        "VisualProbe_Easy", "VisualProbe_Hard", "VisualProbe_Medium"]
    assert not (path / "VisualProbe_Easy" / "README.md").exists()  # only the allowed patterns
    lock = read_lock(path)
    assert lock is not None and [r.folder for r in lock.repos] == [
        "VisualProbe_Easy", "VisualProbe_Medium", "VisualProbe_Hard"]
    suite = make_suite("visualprobe", {"path": str(path)}, BlobStore(tmp_path / "blobs"))
    assert [getattr(t, "id", None) for t in suite.load()] == [
        "visual_probe_easy/1", "visual_probe_medium/1", "visual_probe_hard/1"]
