"""Synthetic releases of the five thinking-with-images benchmarks, each in its official format
(benchmarks-twi.md §1.1-§5.1), with real images encoded by pyvips. Nothing is downloaded."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path
from typing import Any

import pyvips

LETTERS = "ABCDE"


def jpeg(width: int = 64, height: int = 48, value: int = 120) -> bytes:
    """A grey JPEG with a white block top-left (a real image the image layer can decode)."""
    image = (pyvips.Image.black(width, height) + value).cast("uchar")
    image = image.draw_rect(255, 0, 0, max(1, width // 4), max(1, height // 4), fill=True)
    data: bytes = image.write_to_buffer(".jpg[Q=80]")
    return data


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def write_tsv(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for row in rows:
        fields.extend(k for k in row if k not in fields)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, delimiter="\t")
        w.writeheader()
        for row in rows:
            w.writerow({k: row.get(k, "") for k in fields})
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


# --- V* (folders of image + JSON; the first option is the right one) ------------------------------------

VSTAR_ITEMS = [
    ("direct_attributes", "sa_1000", "What is the color of the glove?", ["black", "purple", "white", "red"]),
    ("direct_attributes", "sa_1001", "What is the material of the cup?", ["glass", "paper", "steel", "wood"]),
    ("relative_position", "sa_2000", "Is the dog on the left or right of the car?", ["left", "right"]),
]


def vstar_folder(root: Path, items: list[tuple[str, str, str, list[str]]] = VSTAR_ITEMS) -> Path:
    for category, stem, question, options in items:
        folder = root / category
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{stem}.jpg").write_bytes(jpeg())
        (folder / f"{stem}.json").write_text(json.dumps({
            "target_object": ["x"], "bbox": [[1, 2, 3, 4]], "question": question, "options": options}))
    return root


def vstar_tsv(path: Path) -> Path:
    rows = [{"index": 0, "image": b64(jpeg()), "question": "What is the color of the glove?", "A": "purple",
             "B": "black", "C": "white", "D": "red", "answer": "B", "category": "direct_attributes"},
            {"index": 1, "image": "0", "question": "Is the dog left or right?", "A": "left", "B": "right",
             "answer": "A", "category": "relative_position"}]
    return write_tsv(path, rows)


# --- HR-Bench (one TSV / parquet, 4 option rotations per question) ---------------------------------------

HR_QUESTIONS = [
    ("What number is on the bus?", ["21", "112", "121", "12"], 1, "single"),
    ("Which sign is closer to the tree?", ["stop", "yield", "exit", "bus"], 2, "cross"),
]


def hrbench_rows(image: bytes | None = None, questions: list[tuple[str, list[str], int, str]] = HR_QUESTIONS
                 ) -> list[dict[str, Any]]:
    """Each question under 4 rotations of its options (cycle1..cycle4), gold letter moving with them."""
    rows = []
    index = 0
    for q, (question, options, gold, category) in enumerate(questions):
        data = image if image is not None else jpeg(value=60 + 40 * q)
        for cycle in range(4):
            rotated = options[cycle:] + options[:cycle]
            rows.append({"index": index, "question": question, **dict(zip(LETTERS, rotated, strict=False)),
                         "answer": LETTERS[rotated.index(options[gold])], "category": category,
                         "cycle_category": f"cycle{cycle + 1}", "image": b64(data)})
            index += 1
    return rows


# --- MME-RealWorld (path-form JSON + image folder; base64 TSV) ---------------------------------------------

MME_ITEMS = [
    {"Question_id": "Perception/Diagram and Table/table/0007", "Image": "dt/t07.jpg",
     "Text": "What is the data of Interest in Feb-23 in the table?", "Question Type": "Multiple Choice",
     "Answer choices": ["(A) 458", "(B) 457", "(C) 456", "(D) 455", "(E) This image doesn't feature the data."],
     "Ground truth": "C", "Task": "Perception", "Subtask": "Diagram and Table", "Category": "table"},
    {"Question_id": "Perception/Monitoring/Vehicle/attribute/color/0001", "Image": "mo/v01.jpg",
     "Text": "What color is the car?", "Question Type": "Multiple Choice",
     "Answer choices": ["(A) red", "(B) blue", "(C) white", "(D) black", "(E) The image does not feature the car."],
     "Ground truth": "A", "Task": "Perception", "Subtask": "Monitoring", "Category": "Vehicle/attribute/color"},
    {"Question_id": "Reasoning/Autonomous_Driving/intention/0003", "Image": "ad/a03.jpg",
     "Text": "What will the pedestrian do next?", "Question Type": "Multiple Choice",
     "Answer choices": ["(A) stop", "(B) cross", "(C) turn", "(D) run", "(E) The image does not feature it."],
     "Ground truth": "B", "Task": "Reasoning", "Subtask": "Autonomous_Driving", "Category": "intention"},
]


def mme_path_form(root: Path, items: list[dict[str, Any]] = MME_ITEMS, name: str = "MME_RealWorld.json") -> Path:
    for item in items:
        (root / item["Image"]).parent.mkdir(parents=True, exist_ok=True)
        (root / item["Image"]).write_bytes(jpeg())
    (root / name).write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return root


def mme_lite_tsv(path: Path) -> Path:
    rows = []
    for n, item in enumerate(MME_ITEMS):
        rows.append({"index": n, "image": b64(jpeg()), "question": item["Text"],
                     "multi-choice options": repr(item["Answer choices"]), "answer": item["Ground truth"],
                     "category": f"{item['Task']}/{item['Subtask']}", "l2-category": item["Category"]})
    return write_tsv(path, rows)


# --- TreeBench (TSV with base64 images and target boxes) -----------------------------------------------------

TREE_ROWS = [
    {"index": 7, "question": "What is the material of the cup on the left table?",
     "multi-choice options": "A. glass\nB. paper\nC. steel\nD. ceramic", "A": "glass", "B": "paper", "C": "steel",
     "D": "ceramic", "answer": "D", "category": "Perception/Material", "target_instances": "[[40, 30, 80, 70]]"},
    {"index": 8, "question": "Which object is closer to the camera?",
     "multi-choice options": "A. lamp\nB. chair\nC. door\nD. plant", "A": "lamp", "B": "chair", "C": "door",
     "D": "plant", "answer": "B", "category": "Reasoning/Perspective Transform", "target_instances": "[]"},
]


def treebench_tsv(path: Path, width: int = 200, height: int = 100) -> Path:
    return write_tsv(path, [{**r, "image": b64(jpeg(width, height))} for r in TREE_ROWS])


# --- VisualProbe (val.json + data/ per level) --------------------------------------------------------------

VP_ROWS = [
    {"images": ["VisualProbe_Hard/data/000123.jpg"], "doc_id": 123,
     "problem": "<image>\nWhat is the license plate of the white van behind the bus?", "solution": "KL 4471",
     "data_source": "visual_probe_hard"},
    {"images": ["VisualProbe_Hard/data/000124.jpg"], "doc_id": 124,
     "problem": "<image>\nWhat is written on the red flag?", "solution": "OPEN", "data_source": "visual_probe_hard"},
]


def visualprobe_release(root: Path, rows: list[dict[str, Any]] = VP_ROWS) -> Path:
    folder = root / "VisualProbe_Hard"
    (folder / "data").mkdir(parents=True, exist_ok=True)
    for row in rows:
        (root / row["images"][0]).write_bytes(jpeg())
    (folder / "val.json").write_text(json.dumps(rows))
    return root
