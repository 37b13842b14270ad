"""``source: hf://datasets/ORG/NAME`` end to end against the loopback hub: the split's Parquet with
the hub's image feature ({bytes, path}) downloaded into the data cache and locked, an image named
by path fetched from the same commit, offline from the cache, and a sweep scored and recorded."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import hub_server
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import pyvips
import yaml

from fasteval.cli.main import main
from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, make_suite

REPO = "lab/vqa-mini"


def png(value: int) -> bytes:
    data: bytes = (pyvips.Image.black(16, 12, bands=3) + value).cast("uchar").pngsave_buffer()
    return data


def parquet(rows: list[dict[str, Any]]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


@pytest.fixture
def dataset(fake_hub: hub_server.FakeHub) -> str:
    test = [{"question": "What is 2+2?", "image": {"bytes": png(10), "path": "a.png"}, "answer": "4",
             "scorer": "numeric", "choices": None},
            {"question": "Which colour? A. red B. grey", "image": {"bytes": None, "path": "../images/p1.png"},
             "answer": "B", "scorer": '{"name": "choice"}', "choices": ["red", "grey"]},
            {"question": "Broken row", "image": {"bytes": None, "path": None}, "answer": "x", "scorer": None,
             "choices": None}]
    train = [{"question": "not this split", "image": None, "answer": "0", "scorer": None, "choices": None}]
    return fake_hub.add_dataset(REPO, {
        "README.md": b"# a dataset card, never fetched",
        "data/test-00000-of-00001.parquet": parquet(test),
        "data/train-00000-of-00001.parquet": parquet(train),
        "images/p1.png": png(200),
    })


def options(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"source": f"hf://datasets/{REPO}", "split": "test", "cache_dir": str(tmp_path / "cache"),
            "fields": {"prompt": "question", "options": "choices"}, "options_in_prompt": False, **extra}


def load(tmp_path: Path, opts: dict[str, Any]) -> tuple[list[Task], list[LoadError], BlobStore, Any]:
    blobs = BlobStore(tmp_path / "blobs")
    suite = make_suite("jsonl", opts, blobs)
    items = list(suite.load())
    return ([i for i in items if isinstance(i, Task)], [i for i in items if isinstance(i, LoadError)], blobs, suite)


def test_a_hub_split_with_image_features_loads_from_the_cache_and_offline(
        tmp_path: Path, fake_hub: hub_server.FakeHub, dataset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks, errors, blobs, suite = load(tmp_path, options(tmp_path))
    assert [t.id for t in tasks] == ["row-0", "row-1"]
    assert blobs.get(tasks[0].turns[0].images[0]) == png(10)
    assert blobs.get(tasks[1].turns[0].images[0]) == png(200)  # by path, from the same commit
    assert tasks[1].metadata["scorer"] == {"name": "choice"}
    assert [e.message for e in errors] == [
        "data/test-00000-of-00001.parquet: row 2: 'image': an image object with neither bytes nor a path"]
    assert suite.dataset_identity == {"uri": f"hf://datasets/{REPO}@{dataset}", "commit": dataset,
                                      "files": ["data/test-00000-of-00001.parquet"]}
    folder = tmp_path / "cache" / "datasets" / "lab" / "vqa-mini" / dataset
    lock = json.loads((folder / "fasteval.lock.json").read_text())
    assert sorted(lock["repos"][0]["files"]) == ["data/test-00000-of-00001.parquet", "images/p1.png"]
    assert not (folder / "README.md").exists() and not (folder / "data" / "train-00000-of-00001.parquet").exists()
    # Offline, and with the hub gone: the same tasks from the cache, and not one request.
    fake_hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline, _, _, _ = load(tmp_path, options(tmp_path))
    assert [t.turns[0].images for t in offline] == [t.turns[0].images for t in tasks] and fake_hub.requests == []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    unreachable, _, _, _ = load(tmp_path, options(tmp_path))
    assert len(unreachable) == 2  # the last commit fetched for main


def test_data_fetch_puts_a_hub_source_in_the_cache_for_an_offline_run(
        tmp_path: Path, fake_hub: hub_server.FakeHub, dataset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from fasteval.suites.data_fetch import FetchError, fetch

    folder = fetch(f"hf://datasets/{REPO}", tmp_path / "cache", split="test")
    assert folder == tmp_path / "cache" / "datasets" / "lab" / "vqa-mini" / dataset
    assert (folder / "data" / "test-00000-of-00001.parquet").is_file()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fake_hub.requests.clear()
    tasks, errors, _, _ = load(tmp_path, options(tmp_path))
    assert [t.id for t in tasks] == ["row-0"] and fake_hub.requests == []
    # An image the rows name by path comes when the rows load with the network (a dry run does).
    assert "'../images/p1.png': lab/vqa-mini@" in errors[0].message
    assert "HF_HUB_OFFLINE is set and 1 file(s) are not in the cache, e.g. images/p1.png" in errors[0].message
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(FetchError, match="several splits"):
        fetch(f"hf://datasets/{REPO}", tmp_path / "cache")
    with pytest.raises(FetchError, match="hf://datasets/ORG/NAME"):
        fetch("hf://models/x/y", tmp_path / "cache")


def test_splits_revisions_and_missing_things_are_named(tmp_path: Path, fake_hub: hub_server.FakeHub,
                                                       dataset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, errors, _, _ = load(tmp_path, options(tmp_path, split=None))
    assert "several splits (test, train): choose one with the option 'split'" in errors[0].message
    tasks, _, _, _ = load(tmp_path, options(tmp_path, split="train"))
    assert [t.reference for t in tasks] == ["0"]
    tasks, _, _, _ = load(tmp_path, {**options(tmp_path), "source": f"hf://datasets/{REPO}@{dataset}"})
    assert len(tasks) == 2
    _, errors, _, _ = load(tmp_path, options(tmp_path, revision="v9"))
    assert errors[0].task_id == f"{REPO}-load" and "no such revision" in errors[0].message
    _, errors, _, _ = load(tmp_path, options(tmp_path, split="validation"))
    assert "no data file of split 'validation'" in errors[0].message
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, errors, _, _ = load(tmp_path, options(tmp_path, revision="v2"))
    assert "HF_HUB_OFFLINE is set and this revision was never fetched here" in errors[0].message


def test_a_sweep_on_a_hub_dataset_scores_and_records_which_scorer(tmp_path: Path, fake_hub: hub_server.FakeHub,
                                                                  dataset: str, capsys: pytest.CaptureFixture[str]
                                                                  ) -> None:
    cfg = {"name": "hub-own", "seeds": 1,
           "models": [{"name": "reader", "provider": "sim", "policy": "scripted",
                       "script": [{"match": "2\\+2", "reply": "<answer>4.0</answer>"},
                                  {"match": "Which colour", "reply": "The answer is (A)."}]}],
           "suites": [{"name": "jsonl", "options": options(tmp_path)}],
           "run": {"fsync": "never", "cache": {"path": str(tmp_path / "cache.sqlite")}}}
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(cfg))
    capsys.readouterr()
    code = main(["run", str(path), "--run-dir", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1, err  # the broken row is a load error: the run says some jobs ended in error
    recs = {r["task_id"]: r for r in map(orjson.loads, (tmp_path / "run" / "records.jsonl").read_bytes().splitlines())}
    assert recs["row-0"]["score"] == 1.0 and recs["row-0"]["score_details"]["scorer"] == "numeric"
    assert recs["row-1"]["score"] == 0.0 and recs["row-1"]["score_details"]["scorer"] == "choice"
    assert recs["row-1"]["score_details"]["checks"][0]["chosen"] == "A"
    assert recs["row-2"]["status"] == "error" and "neither bytes nor a path" in recs["row-2"]["error"]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["texts"]["jsonl"]["data"]["commit"] == dataset
