"""A small TIR-Bench release in the official layout (TIR-Bench.json + data/), with real images."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pyvips
from PIL import Image

from fasteval.runfolder.blobs import BlobStore


def _png_with_pyvips(path: Path, width: int, height: int, value: int) -> None:
    """A grey PNG with a white square in the top-left corner (so rotations are visible)."""
    image = (pyvips.Image.black(width, height) + value).cast("uchar")
    image = image.draw_rect(255, 0, 0, max(1, width // 4), max(1, height // 4), fill=True)
    image.write_to_file(str(path))


def _jpeg_with_pillow(path: Path, colour: tuple[int, int, int]) -> None:
    Image.new("RGB", (48, 32), colour).save(path, format="JPEG")


GOOD_ROWS: list[dict[str, Any]] = [
    {"id": 101, "task": "color", "prompt": "Which colour dominates? A. red B. green C. blue D. grey",
     "answer": "D", "image_1": "data/color/1.png", "image_2": None, "meta_data": {}},
    {"id": 102, "task": "jigsaw", "prompt": "Restore the 2x2 jigsaw; list the pieces.",
     "answer": "2, 1, 4, 3", "image_1": "data/jigsaw/7.jpg", "image_2": None, "meta_data": {"difficulty": 2}},
    {"id": 103, "task": "spot_difference", "prompt": "Which patches differ?",
     "answer": "[2, 5]", "image_1": "data/spot/a.jpg", "image_2": "data/spot/b.jpg", "meta_data": {}},
    {"id": 104, "category": "ocr", "prompt": "Read the rotated text.",
     "answer": "hello", "image_1": "data/ocr/60.jpg", "image_2": None, "metadata": {}},
    {"id": 105, "task": "instrument", "prompt": "Thermometer reading in Fahrenheit? Answer as an integer.",
     "answer": 72, "image_1": "data/instrument/5.png", "image_2": None, "meta_data": {}},
]

BAD_ROWS: list[Any] = [
    {"id": 106, "task": "instrument", "prompt": "Reading?", "answer": "3",
     "image_1": "data/missing.jpg", "image_2": None, "meta_data": {}},
    {"id": 107, "task": "bogus", "prompt": "?", "answer": "A", "image_1": "data/color/1.png", "image_2": None},
    {"id": 108, "task": "jigsaw", "prompt": "?", "answer": "1, 2, 3, 4",
     "image_1": "data/jigsaw/7.jpg", "image_2": None, "meta_data": {}},
    {"id": 101, "task": "color", "prompt": "duplicate", "answer": "A", "image_1": "data/color/1.png"},
    "not a row",
    {"id": 110, "task": "math", "prompt": "?", "answer": None, "image_1": "data/color/1.png"},
]


def write_release(root: Path, rows: list[Any]) -> Path:
    """Write TIR-Bench.json and the images the good rows name; returns the release folder."""
    for sub in ("color", "jigsaw", "spot", "ocr", "instrument"):
        (root / "data" / sub).mkdir(parents=True, exist_ok=True)
    _png_with_pyvips(root / "data/color/1.png", 40, 24, 90)
    _png_with_pyvips(root / "data/instrument/5.png", 30, 30, 30)
    _jpeg_with_pillow(root / "data/jigsaw/7.jpg", (200, 10, 10))
    _jpeg_with_pillow(root / "data/spot/a.jpg", (10, 200, 10))
    _jpeg_with_pillow(root / "data/spot/b.jpg", (10, 10, 200))
    _jpeg_with_pillow(root / "data/ocr/60.jpg", (250, 250, 250))
    (root / "TIR-Bench.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return root


@pytest.fixture
def release(tmp_path: Path) -> Path:
    return write_release(tmp_path / "TIR-Bench", GOOD_ROWS + BAD_ROWS)


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")
