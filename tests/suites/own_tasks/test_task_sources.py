"""The jsonl suite reads tasks from JSONL, JSON, CSV, TSV and Parquet, with images as paths, data
URLs, base64, URLs (fetched once from a loopback server) and the hub's image struct; a row that
cannot be used is one load error naming the row and why, and the rest load."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import pyvips
from aiohttp import web

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, make_suite


def png(value: int = 80) -> bytes:
    data: bytes = (pyvips.Image.black(12, 8, bands=3) + value).cast("uchar").pngsave_buffer()
    return data


def load(tmp_path: Path, options: dict[str, Any]) -> tuple[list[Task], list[LoadError], BlobStore]:
    blobs = BlobStore(tmp_path / "blobs")
    items = list(make_suite("jsonl", options, blobs).load())
    return ([i for i in items if isinstance(i, Task)], [i for i in items if isinstance(i, LoadError)], blobs)


def write_csv(path: Path, rows: list[dict[str, Any]], delimiter: str = ",") -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_csv_with_a_folder_of_images_each_scorer_and_its_bad_rows(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(png(10))
    (tmp_path / "images" / "b.png").write_bytes(png(20))
    rows = [
        {"id": "count", "prompt": "How many?", "images": "images/a.png", "answer": "1,000", "options": "",
         "scorer": "numeric"},
        {"id": "pick", "prompt": "Which?", "images": '["images/a.png", "images/b.png"]', "answer": "(B)",
         "options": "red | green | blue", "scorer": "choice"},
        {"id": "tol", "prompt": "Share?", "images": "", "answer": "50%", "options": "",
         "scorer": '{"name": "numeric", "abs_tol": 0.01}'},
        {"id": "many", "prompt": "City?", "images": "", "answer": '["NYC", "New York"]', "options": "", "scorer": ""},
        {"id": "bad-num", "prompt": "How many?", "images": "", "answer": "lots", "options": "", "scorer": "numeric"},
        {"id": "bad-img", "prompt": "See?", "images": "images/missing.png", "answer": "x", "options": "", "scorer": ""},
        {"id": "bad-scorer", "prompt": "Q", "images": "", "answer": "x", "options": "", "scorer": "fuzzy"},
        {"id": "bad-choice", "prompt": "Q", "images": "", "answer": "D", "options": "a | b", "scorer": "choice"},
        {"id": "bad-regex", "prompt": "Q", "images": "", "answer": "(", "options": "", "scorer": "regex"},
        {"id": "", "prompt": "", "images": "", "answer": "x", "options": "", "scorer": ""},
    ]
    tasks, errors, blobs = load(tmp_path, {"path": str(write_csv(tmp_path / "tasks.csv", rows))})
    by_id = {t.id: t for t in tasks}
    assert list(by_id) == ["count", "pick", "tol", "many"]
    assert blobs.get(by_id["count"].turns[0].images[0]) == png(10)
    assert [blobs.get(r) for r in by_id["pick"].turns[0].images] == [png(10), png(20)]
    assert by_id["pick"].turns[0].text == "Which?\n\nA. red\nB. green\nC. blue"
    assert by_id["pick"].metadata["options"] == {"A": "red", "B": "green", "C": "blue"}
    assert by_id["tol"].metadata["scorer"] == {"name": "numeric", "abs_tol": 0.01}
    assert by_id["many"].reference == ["NYC", "New York"]
    assert by_id["many"].metadata["scorer"] == {"name": "any_of", "of": {"name": "exact"}}
    messages = {e.task_id: e.message for e in errors}
    assert messages == {
        "bad-num": "tasks.csv: line 6 (id bad-num): 'answer' 'lots' is not one number (scorer 'numeric')",
        "bad-img": "tasks.csv: line 7 (id bad-img): 'images' 'images/missing.png' cannot be read (No such file or "
                   "directory)",
        "bad-scorer": "tasks.csv: line 8 (id bad-scorer): 'scorer': unknown scorer 'fuzzy'; known: exact, contains, "
                      "numeric, regex, choice, math, judge, any_of",
        "bad-choice": "tasks.csv: line 9 (id bad-choice): 'answer' 'D' names none of the options A, B (give a "
                      "letter, (B), B. text, or one option's exact text)",
        "bad-regex": "tasks.csv: line 10 (id bad-regex): 'answer' '(' is not a valid regular expression (missing ) "
                     "at position 1)",
        "line-11": "tasks.csv: line 11: 'prompt' must be a non-empty string",
    }


def test_a_parquet_with_image_structs_and_renamed_columns(tmp_path: Path) -> None:
    table = pa.table({
        "qid": ["q1", "q2", "q3"],
        "question": ["What colour?", "Which?", "Broken?"],
        "image": [{"bytes": png(1), "path": "x.png"}, {"bytes": png(2), "path": None}, {"bytes": None, "path": None}],
        "second": [{"bytes": png(3), "path": None}, None, None],
        "label": ["red", "2", "x"],
        "source": ["web", "cam", "web"],
        "difficulty": [1, 2, 3],
    })
    pq.write_table(table, tmp_path / "t.parquet")
    tasks, errors, blobs = load(tmp_path, {"path": str(tmp_path / "t.parquet"), "fields": {
        "id": "qid", "prompt": "question", "images": ["image", "second"], "answer": "label",
        "metadata": ["source", "difficulty"]}, "scorer": {"name": "contains"}})
    assert [t.id for t in tasks] == ["q1", "q2"]
    assert [blobs.get(r) for r in tasks[0].turns[0].images] == [png(1), png(3)]
    assert tasks[0].metadata == {"source": "web", "difficulty": 1, "scorer": {"name": "contains"}}
    assert [e.message for e in errors] == [
        "t.parquet: row 2 (id q3): 'image/second[0]': an image object with neither bytes nor a path"]


def test_jsonl_json_and_tsv_and_legacy_match(tmp_path: Path) -> None:
    b64 = base64.b64encode(png(5)).decode()
    lines = [{"id": 1, "prompt": "a", "answer": "x", "match": "contains", "images": [f"data:image/png;base64,{b64}"]},
             {"id": 2, "prompt": "b", "answer": 3, "images": [b64], "scorer": {"name": "numeric"}},
             {"id": 3, "turns": [{"text": "first", "answer": "1"}, {"prompt": "second", "answer": "2"}]}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + "not json\n")
    tasks, errors, blobs = load(tmp_path, {"path": str(tmp_path / "t.jsonl")})
    assert [t.id for t in tasks] == ["1", "2", "3"]
    assert tasks[0].metadata["scorer"] == {"name": "contains"}
    assert blobs.get(tasks[0].turns[0].images[0]) == png(5) == blobs.get(tasks[1].turns[0].images[0])
    assert [t.reference for t in tasks[2].turns] == ["1", "2"]
    assert [e.task_id for e in errors] == ["line-4"] and "not valid JSON" in errors[0].message
    (tmp_path / "t.json").write_text(json.dumps(lines[:2]))
    assert [t.id for t in load(tmp_path, {"path": str(tmp_path / "t.json")})[0]] == ["1", "2"]
    write_csv(tmp_path / "t.tsv", [{"id": "a", "prompt": "p, with comma", "answer": "x"}], delimiter="\t")
    tasks, _, _ = load(tmp_path, {"path": str(tmp_path / "t.tsv"), "limit": 5})
    assert tasks[0].turns[0].text == "p, with comma"


def test_paths_stay_inside_the_dataset_folder(tmp_path: Path) -> None:
    (tmp_path / "outside.png").write_bytes(png())
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "t.jsonl").write_text(json.dumps({"prompt": "p", "answer": "a",
                                                           "images": ["../outside.png"]}) + "\n")
    _, errors, _ = load(tmp_path, {"path": str(tmp_path / "data" / "t.jsonl")})
    assert "leads outside the dataset folder" in errors[0].message
    tasks, _, _ = load(tmp_path, {"path": str(tmp_path / "data" / "t.jsonl"), "allow_image_root": str(tmp_path)})
    assert len(tasks) == 1


async def test_image_urls_are_fetched_once_and_kept_in_the_data_cache(tmp_path: Path) -> None:
    hits: list[str] = []

    async def image(request: web.Request) -> web.Response:
        hits.append(request.path)
        if request.path == "/gone.png":
            return web.Response(status=404)
        return web.Response(body=png(9), content_type="image/png")

    app = web.Application()
    app.router.add_get("/{name}", image)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rows = [{"id": "a", "prompt": "p", "answer": "x", "images": [f"http://127.0.0.1:{port}/a.png"]},
            {"id": "b", "prompt": "p", "answer": "x", "images": [f"http://127.0.0.1:{port}/gone.png"]}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    import asyncio

    opts = {"path": str(tmp_path / "t.jsonl"), "cache_dir": str(tmp_path / "cache")}
    try:
        tasks, errors, blobs = await asyncio.to_thread(load, tmp_path, opts)
        assert blobs.get(tasks[0].turns[0].images[0]) == png(9)
        assert errors[0].message.endswith("/gone.png' cannot be fetched (HTTP 404)")
        again, _, _ = await asyncio.to_thread(load, tmp_path, opts)
        assert len(again) == 1 and hits == ["/a.png", "/gone.png", "/gone.png"]  # a.png came from the cache
    finally:
        await runner.cleanup()


def test_the_suite_checks_its_options(tmp_path: Path) -> None:
    from fasteval.core.errors import ConfigError

    blobs = BlobStore(tmp_path / "blobs")
    with pytest.raises(ConfigError, match="'path' .* or 'source' .* is required"):
        make_suite("jsonl", {}, blobs)
    with pytest.raises(ConfigError, match="not both"):
        make_suite("jsonl", {"path": "a.csv", "source": "hf://datasets/a/b"}, blobs)
    with pytest.raises(ConfigError, match="hf://datasets/ORG/NAME"):
        make_suite("jsonl", {"source": "hf://models/a/b"}, blobs)
    with pytest.raises(ConfigError, match="unknown scorer 'fuzzy'"):
        make_suite("jsonl", {"path": "a.csv", "scorer": "fuzzy"}, blobs)
    with pytest.raises(ConfigError, match="unknown field 'question'"):
        make_suite("jsonl", {"path": "a.csv", "fields": {"question": "q"}}, blobs)
    suite = make_suite("jsonl", {"path": "a.csv", "scorer": {"name": "judge", "role": "grader"}}, blobs)
    assert suite.roles_needed(suite.default_settings()[0]) == frozenset({"grader"})
