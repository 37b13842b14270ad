"""VisualToolBench data in its official formats, built in tmp_path by the tests themselves.

``write_parquet`` uses the HF per-turn schema (list<string> columns, rubrics as JSON strings,
images as HF Image structs {bytes, path}); ``write_dataset_json`` lays files out the way the
reference repo's download_dataset.py does (data/<split>/dataset.json + PNGs, relative paths).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SCHEMA = pa.schema([
    ("id", pa.string()),
    ("turncase", pa.string()),
    ("num_turns", pa.int64()),
    ("prompt_category", pa.string()),
    ("eval_focus", pa.string()),
    ("turn_prompts", pa.list_(pa.string())),
    ("turn_golden_answers", pa.list_(pa.string())),
    ("turn_tool_trajectories", pa.list_(pa.string())),
    ("rubrics_by_turn", pa.list_(pa.string())),
    ("images", pa.list_(IMAGE)),
    ("images_by_turn", pa.list_(pa.list_(IMAGE))),
    ("num_images", pa.int64()),
])


def png_bytes(color: tuple[int, int, int], size: tuple[int, int] = (8, 6)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def rubric(description: str, weight: int, critical: str = "no") -> dict[str, Any]:
    return {"description": description, "weight": weight, "objective/subjective": "objective",
            "explicit/implicit": "explicit", "category": ["visual understanding"], "critical": critical,
            "final_answer": "yes"}


def row(task_id: str, category: str, focus: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """A dataset row; each turn is {prompt, golden, rubrics: {id: rubric}, images: [bytes]}."""
    by_turn = [[{"bytes": b, "path": f"{task_id}_{t}_{i}.png"} for i, b in enumerate(tr["images"])]
               for t, tr in enumerate(turns)]
    flat = [img for imgs in by_turn for img in imgs]
    return {
        "id": task_id,
        "turncase": "single-turn" if len(turns) == 1 else "multi-turn",
        "num_turns": len(turns),
        "prompt_category": category,
        "eval_focus": focus,
        "turn_prompts": [tr["prompt"] for tr in turns],
        "turn_golden_answers": [tr["golden"] for tr in turns],
        "turn_tool_trajectories": [json.dumps([{"tool": "python_image_processing"}]) for _ in turns],
        "rubrics_by_turn": [tr["rubrics"] if isinstance(tr["rubrics"], str) else json.dumps(tr["rubrics"])
                            for tr in turns],
        "images": flat,
        "images_by_turn": by_turn,
        "num_images": len(flat),
    }


RED, GREEN, BLUE = png_bytes((255, 0, 0)), png_bytes((0, 255, 0)), png_bytes((0, 0, 255))
SINGLE_ID = "65f0a1b2c3d4e5f601234567"
MULTI_ID = "65f0a1b2c3d4e5f601234568"
BAD_ID = "65f0a1b2c3d4e5f601234569"


def sample_rows() -> list[dict[str, Any]]:
    """A single-turn task with two images, a three-turn task, and a row with broken rubric JSON."""
    single = row(SINGLE_ID, "physics", "region_switch_qa", [{
        "prompt": "What does the gauge on the left read?",
        "golden": "It reads 42 kPa.",
        "rubrics": {"r-1": rubric("States 42 kPa", 5, "yes"), "r-2_01": rubric("Uses numbering", 2, "yes")},
        "images": [RED, GREEN],
    }])
    multi = row(MULTI_ID, "finance", "temporal_reasoning", [
        {"prompt": "Which month had the highest revenue?", "golden": "March.",
         "rubrics": {"m1": rubric("Says March", 4)}, "images": [BLUE, RED]},
        {"prompt": "And the lowest?", "golden": "July.",
         "rubrics": {"m2": rubric("Says July", 5), "m3": rubric("Is concise", 1)}, "images": []},
        {"prompt": "Compare with this chart.", "golden": "Both peak in March.",
         "rubrics": {"m4": rubric("Notes the shared March peak", 3)}, "images": [GREEN]},
    ])
    bad = row(BAD_ID, "medical", "hybrid_tool_reasoning", [
        {"prompt": "q1", "golden": "a1", "rubrics": {"b1": rubric("x", 3)}, "images": [RED]},
        {"prompt": "q2", "golden": "a2", "rubrics": "{not json", "images": []},
    ])
    return [single, multi, bad]


def write_parquet(path: Path, rows: list[dict[str, Any]], row_group_size: int = 1) -> Path:
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_dataset_json(root: Path, rows: list[dict[str, Any]]) -> Path:
    """The reference export: images as PNG files, paths relative to the repo root ``root``."""
    splits: dict[str, list[dict[str, Any]]] = {"single_turn": [], "multi_turn": []}
    for r in rows:
        split = "single_turn" if len(r["turn_prompts"]) == 1 else "multi_turn"
        k = len(splits[split])
        folder = root / "data" / split / "images" / f"sample_{k}"
        folder.mkdir(parents=True)
        out = {key: v for key, v in r.items() if key not in ("images", "images_by_turn")}
        out["image_paths"] = []
        for i, img in enumerate(r["images"]):
            (folder / f"image_{i}.png").write_bytes(img["bytes"])
            out["image_paths"].append(f"data/{split}/images/sample_{k}/image_{i}.png")
        out["images_by_turn_paths"] = []
        for t, imgs in enumerate(r["images_by_turn"]):
            paths = []
            for i, img in enumerate(imgs):
                (folder / f"turn_{t}_image_{i}.png").write_bytes(img["bytes"])
                paths.append(f"data/{split}/images/sample_{k}/turn_{t}_image_{i}.png")
            out["images_by_turn_paths"].append(paths)
        splits[split].append(out)
    for split, items in splits.items():
        (root / "data" / split).mkdir(parents=True, exist_ok=True)
        (root / "data" / split / "dataset.json").write_text(json.dumps(items, indent=2))
    return root / "data"
