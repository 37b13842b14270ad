"""Bad dataset rows: each becomes that row's LoadError naming line/row and field; later rows load.

Covers every loader (jsonl, TIR-Bench, VisualToolBench, VistaHop) with wrong field types and
with image paths that leave the dataset folder (refused unless ``allow_image_root`` allows it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import pyvips

from fasteval.config.load import load_config
from fasteval.core.types import Task
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, make_suite
from fasteval.suites.tirbench.loader import load_tirbench
from fasteval.suites.vistahop.loader import LoaderConfig, load_tasks
from fasteval.suites.visualtoolbench.loader import iter_tasks


def png(path: Path, value: int = 80) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (pyvips.Image.black(12, 8, bands=3) + value).cast("uchar").write_to_file(str(path))
    return path


def errors(items: list[Task | LoadError]) -> dict[str, str]:
    return {i.task_id: i.message for i in items if isinstance(i, LoadError)}


def tasks(items: list[Task | LoadError]) -> list[str]:
    return [i.id for i in items if isinstance(i, Task)]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """An image outside the dataset folder: what ``../`` paths in a hostile dataset reach for."""
    return png(tmp_path / "elsewhere" / "secret.png", 200)


def jsonl_rows(outside: Path) -> list[Any]:
    return [
        {"id": "good-1", "prompt": "2+2?", "answer": "4"},
        {"id": "tools-int", "prompt": "q", "answer": "a", "tools": 5},
        {"id": "meta-list", "prompt": "q", "answer": "a", "metadata": [1, 2]},
        {"id": "turns-int", "turns": [5]},
        {"id": "tools-str", "prompt": "q", "answer": "a", "tools": "calculator"},
        {"id": "escape", "prompt": "q", "answer": "a", "images": ["../elsewhere/secret.png"]},
        {"id": "absolute", "prompt": "q", "answer": "a", "images": [str(outside)]},
        {"id": "image-int", "prompt": "q", "answer": "a", "images": [7]},
        {"id": "answer-obj", "prompt": "q", "answer": {"x": 1}},
        {"id": ["not", "an", "id"], "prompt": "q", "answer": "a"},
        "[1, 2]",
        {"id": "good-2", "prompt": "3+3?", "answer": 6, "images": ["img.png"], "tools": ["calculator"]},
    ]


def write_jsonl(folder: Path, rows: list[Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    png(folder / "img.png")
    path = folder / "tasks.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows) + "{broken\n")
    return path


def test_jsonl_bad_rows_name_line_and_field_and_later_rows_still_load(tmp_path: Path, outside: Path) -> None:
    path = write_jsonl(tmp_path / "data", jsonl_rows(outside))
    items = list(make_suite("jsonl", {"path": str(path)}, BlobStore(tmp_path / "blobs")).load())
    assert tasks(items) == ["good-1", "good-2"]
    err = errors(items)
    assert "line 2" in err["tools-int"] and "'tools'" in err["tools-int"]
    assert "line 3" in err["meta-list"] and "'metadata'" in err["meta-list"]
    assert "line 4" in err["turns-int"] and "turn 0" in err["turns-int"]
    assert "'tools'" in err["tools-str"]  # a string is not iterated as tool names
    assert "outside the dataset folder" in err["escape"] and "images[0]" in err["escape"]
    assert "outside the dataset folder" in err["absolute"]
    assert "'images[0]'" in err["image-int"]
    assert "'answer'" in err["answer-obj"]
    assert "line 10" in err["line-10"] and "'id'" in err["line-10"]
    assert "line 11" in err["line-11"] and "JSON object" in err["line-11"]
    assert "line 13: not valid JSON" in err["line-13"]  # the unparsable last line
    assert all("\n" not in m and len(m) < 700 for m in err.values())


def test_jsonl_allow_image_root_admits_one_more_folder(tmp_path: Path, outside: Path) -> None:
    path = write_jsonl(tmp_path / "data", jsonl_rows(outside))
    suite = make_suite("jsonl", {"path": str(path), "allow_image_root": str(outside.parent)}, BlobStore(tmp_path / "b"))
    assert {"escape", "absolute", "good-1", "good-2"} <= set(tasks(list(suite.load())))


async def test_a_sweep_plans_every_row_after_a_bad_one(tmp_path: Path, outside: Path) -> None:
    path = write_jsonl(tmp_path / "data", jsonl_rows(outside))
    cfg_path = tmp_path / "sweep.yaml"
    cfg_path.write_text(json.dumps({
        "seeds": 1, "models": [{"name": "sim", "provider": "sim", "policy": "direct"}],
        "suites": [{"name": "jsonl", "options": {"path": str(path)}}]}))
    run_dir = tmp_path / "run"
    await run_sweep(load_config(cfg_path), RunOptions(run_dir=run_dir, progress=False))
    recs = [orjson.loads(ln) for ln in (run_dir / "records.jsonl").read_bytes().splitlines()]
    by_task = {r["task_id"]: r for r in recs}
    assert len(recs) == 13
    assert by_task["good-2"]["error_kind"] != "load_error" and by_task["good-1"]["error_kind"] != "load_error"
    assert by_task["tools-int"]["error_kind"] == "load_error" and "'tools'" in by_task["tools-int"]["error"]
    assert not any("loader failed" in (r["error"] or "") for r in recs)
    secret = outside.read_bytes()  # noqa: ASYNC240 (a tiny test file)
    stored = [f.read_bytes() for f in (run_dir / "blobs").rglob("*") if f.is_file()]  # noqa: ASYNC240
    assert secret not in stored  # nothing from outside the dataset folder was copied in


def test_tirbench_bad_types_and_escaping_images(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "TIR-Bench"
    png(root / "data" / "1.png")
    base = {"task": "color", "prompt": "Which colour?", "answer": "A", "image_2": None, "meta_data": {}}
    rows: list[Any] = [
        {**base, "id": 1, "image_1": "data/1.png"},
        {**base, "id": 2, "image_1": "data/1.png", "task": ["color"]},
        {**base, "id": 3, "image_1": "data/1.png", "meta_data": [1, 2]},
        {**base, "id": 4, "image_1": "../elsewhere/secret.png"},
        {**base, "id": 5, "image_1": str(outside)},
        {**base, "id": 6, "image_1": 5},
        {**base, "id": 7, "image_1": "data/1.png", "image_2": ["data/1.png"]},
        {**base, "id": 8, "image_1": "data/1.png", "prompt": {"text": "?"}},
        {**base, "id": 9, "image_1": "data/1.png", "answer": "B"},
    ]
    (root / "TIR-Bench.json").write_text(json.dumps(rows))
    items = list(load_tirbench(root, BlobStore(tmp_path / "blobs")))
    assert tasks(items) == ["1", "9"]
    err = errors(items)
    assert "'task'" in err["2"] and "'meta_data'" in err["3"] and "'image_1'" in err["6"]
    assert "'image_2'" in err["7"] and "'prompt'" in err["8"]
    assert "outside the dataset folder" in err["4"] and "outside the dataset folder" in err["5"]
    allowed = list(load_tirbench(root, BlobStore(tmp_path / "b2"), allow_image_root=str(outside.parent)))
    assert {"4", "5"} <= set(tasks(allowed))


def test_visualtoolbench_bad_types_and_escaping_images(tmp_path: Path, outside: Path) -> None:
    data = tmp_path / "vtb" / "data" / "single_turn"
    png(data / "images" / "a.png")
    rubrics = json.dumps({"r1": {"description": "says red", "weight": 3}})
    base = {"turn_prompts": ["what?"], "turn_golden_answers": ["red"], "rubrics_by_turn": [rubrics],
            "prompt_category": "physics", "eval_focus": "x"}
    rows: list[Any] = [
        {**base, "id": "ok-1", "image_paths": ["data/single_turn/images/a.png"]},
        {**base, "id": "escape", "image_paths": ["../../../elsewhere/secret.png"]},
        {**base, "id": "absolute", "image_paths": [str(outside)]},
        {**base, "id": "bytes-str", "images": [{"bytes": "not bytes", "path": None}]},
        {**base, "id": "prompts-int", "turn_prompts": 5},
        {**base, "id": "category-list", "prompt_category": ["physics"]},
        {**base, "id": ["x"]},
        {**base, "id": "ok-2", "image_paths": ["data/single_turn/images/a.png"]},
    ]
    (data / "dataset.json").write_text(json.dumps(rows))
    items = list(iter_tasks(data / "dataset.json", BlobStore(tmp_path / "blobs")))
    assert tasks(items) == ["ok-1", "ok-2"]
    err = errors(items)
    assert "outside the dataset folder" in err["escape"] and "image_paths[0]" in err["escape"]
    assert "outside the dataset folder" in err["absolute"]
    assert "images[0]" in err["bytes-str"] and "turn_prompts" in err["prompts-int"]
    assert "prompt_category" in err["category-list"] and "row 6" in err["row6"]
    allowed = list(iter_tasks(data / "dataset.json", BlobStore(tmp_path / "b2"),
                              allow_image_root=str(outside.parent)))
    assert "absolute" in tasks(allowed)


def test_vistahop_bad_types_and_escaping_images(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "vh"
    png(root / "images" / "a.png")

    def rec(**kw: Any) -> dict[str, Any]:
        return {"prompt": [{"role": "user", "content": "<image>Where is this?"}],
                "reward_model": {"ground_truth": "Paris"}, "image": ["images/a.png"], **kw}

    rows: list[Any] = [
        rec(),
        rec(image=["../elsewhere/secret.png"]),
        rec(image=[str(outside)]),
        rec(prompt=[{"role": "user", "content": [{"type": "text", "text": 5}]}]),
        rec(reward_model={"ground_truth": {"a": 1}}),
        rec(image=5),
        rec(image_search_thumbnail_list=["../elsewhere/secret.png"]),
        rec(level=["L1"]),
        rec(),
    ]
    path = root / "data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    items = list(load_tasks(LoaderConfig(path=path, root=root), BlobStore(tmp_path / "blobs")))
    assert tasks(items) == ["vistahop-0", "vistahop-8"]
    err = errors(items)
    assert "outside the dataset folder" in err["vistahop-1"] and "image[0]" in err["vistahop-1"]
    assert "outside the dataset folder" in err["vistahop-2"]
    assert "row 3" in err["vistahop-3"] and "row 4" in err["vistahop-4"] and "image" in err["vistahop-5"]
    assert "image_search_thumbnail_list[0]" in err["vistahop-6"] and "level" in err["vistahop-7"]
    suite = make_suite("vistahop", {"path": str(path), "allow_image_root": str(outside.parent),
                                    "require_levels": False},  # these rows carry no level fields
                       BlobStore(tmp_path / "b2"))
    assert {"vistahop-1", "vistahop-2", "vistahop-6"} <= set(tasks(list(suite.load())))
