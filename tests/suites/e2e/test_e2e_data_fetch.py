"""``fasteval.suites.data_fetch.fetch``: hub download when possible, a clear manual recipe otherwise.

huggingface_hub is not a dependency and there is no network in tests: a stand-in module plays the
hub, serving the files the official TIR-Bench release holds, and the loader then reads them.
"""

from __future__ import annotations

import io
import json
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import pytest

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import SUITES
from fasteval.suites.data_fetch import DATASETS, FetchError, fetch, source
from fasteval.suites.tirbench import load_tirbench


def test_every_dataset_is_a_suite_and_names_resolve() -> None:
    assert set(DATASETS) <= set(SUITES)
    assert source("TIR-Bench").repo_id == "Agents-X/TIR-Bench"
    assert source("vtb").repo_id == "ScaleAI/VisualToolBench"
    with pytest.raises(ValueError, match="known: \\[.*'tirbench', .*'vistahop', .*'visualtoolbench', .*'tirbench-reference'"):
        source("mmmu")


@pytest.mark.parametrize(("name", "repo"), [("tirbench", "Agents-X/TIR-Bench"),
                                            ("visualtoolbench", "ScaleAI/VisualToolBench")])
def test_without_huggingface_hub_the_error_says_what_to_put_where(
        name: str, repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    with pytest.raises(FetchError) as e:
        fetch(name, tmp_path / "dest")
    msg = str(e.value)
    assert "huggingface_hub is not installed" in msg and repo in msg and str(tmp_path / "dest") in msg
    assert not (tmp_path / "dest").exists()


def test_vistahop_is_manual_and_names_the_github_repo(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match=r"ahang0712/vistahop.*git lfs pull --include data/subset1.parquet"):
        fetch("vistahop", tmp_path)


def _fake_hub(monkeypatch: pytest.MonkeyPatch, files: dict[str, bytes], calls: list[dict[str, Any]]) -> None:
    def snapshot_download(**kwargs: Any) -> str:
        calls.append(kwargs)
        for rel, data in files.items():
            (Path(kwargs["local_dir"]) / rel).write_bytes(data)
        return str(kwargs["local_dir"])

    module = types.ModuleType("huggingface_hub")
    module.snapshot_download = snapshot_download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)


def test_tirbench_fetch_unzips_the_images_where_the_loader_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    png = io.BytesIO()
    from PIL import Image
    Image.new("RGB", (8, 8), (9, 9, 9)).save(png, format="PNG")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("data/color/1.png", png.getvalue())
    rows = [{"id": 1, "task": "color", "prompt": "A. x B. y", "answer": "A", "image_1": "data/color/1.png",
             "image_2": None, "meta_data": {}}]
    calls: list[dict[str, Any]] = []
    _fake_hub(monkeypatch, {"TIR-Bench.json": json.dumps(rows).encode(), "data.zip": archive.getvalue()}, calls)

    path = fetch("tirbench", tmp_path / "TIR-Bench", revision="main")
    assert path == tmp_path / "TIR-Bench"
    assert calls == [{"repo_id": "Agents-X/TIR-Bench", "repo_type": "dataset", "revision": "main",
                      "local_dir": str(path), "allow_patterns": ["TIR-Bench.json", "data.zip"]}]
    items = list(load_tirbench(str(path), BlobStore(tmp_path / "blobs")))
    assert len(items) == 1 and isinstance(items[0], Task) and items[0].metadata["task_type"] == "color"


def test_a_zip_that_escapes_the_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../evil.txt", "x")
    _fake_hub(monkeypatch, {"TIR-Bench.json": b"[]", "data.zip": archive.getvalue()}, [])
    with pytest.raises(FetchError, match="outside"):
        fetch("tirbench", tmp_path / "dest")
    assert not (tmp_path / "evil.txt").exists()


def test_a_failed_download_gives_the_manual_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("huggingface_hub")

    def snapshot_download(**kwargs: Any) -> str:
        raise OSError("Network is unreachable")

    module.snapshot_download = snapshot_download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    with pytest.raises(FetchError, match=r"ScaleAI/VisualToolBench failed \(OSError: Network is unreachable\)"):
        fetch("visualtoolbench", tmp_path)
