"""Fixtures in the official VistaHop formats, built in tmp_path: images on disk, a JSON array."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from fasteval.runfolder.blobs import BlobStore


def png_bytes(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    """A small distinct PNG; distinct colours give distinct blob refs."""
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def record(question: str, golds: Any, image: Any, titles: list[str] | None = None,
           thumbs: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    """One verl/MMSearch-R1 style record as the public runner reads it."""
    row: dict[str, Any] = {
        "data_source": "vistahop",
        "prompt": [{"role": "user", "content": f"<image>{question}"}],
        "reward_model": {"style": "rule", "ground_truth": golds},
        "image": image,
    }
    if titles is not None:
        row["image_search_title_list"] = titles
    if thumbs is not None:
        row["image_search_thumbnail_list"] = thumbs
    row.update(extra)
    return row


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def png() -> Callable[..., bytes]:
    """``png(color, size)``: a small PNG in memory."""
    return png_bytes


@pytest.fixture
def make_record() -> Callable[..., dict[str, Any]]:
    """``make_record(question, golds, image, titles, thumbs, **extra)``: one official record."""
    return record


@pytest.fixture
def jsonl_writer() -> Callable[[Path, list[Any]], Path]:
    return write_jsonl


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data root with two images and six thumbnails on disk, as the runner's ``root``."""
    root = tmp_path / "data"
    (root / "images").mkdir(parents=True)
    (root / "thumbs").mkdir()
    (root / "images" / "a.png").write_bytes(png_bytes((255, 0, 0)))
    (root / "images" / "b.png").write_bytes(png_bytes((0, 255, 0)))
    for i in range(6):
        (root / "thumbs" / f"t{i}.png").write_bytes(png_bytes((10 * i, 20, 30), (16, 16)))
    return root


@pytest.fixture
def json_file(data_dir: Path) -> Path:
    """A JSON array: paths relative to root, one base64 thumbnail, levels in two spellings."""
    rows = [
        record("Which company owns the ship?", ["Hapag-Lloyd", "Hapag Lloyd AG"], ["images/a.png"],
               titles=[f"title {i}" for i in range(6)], thumbs=[f"thumbs/t{i}.png" for i in range(6)],
               extra_info={"evidence_steps": 12, "category": "Society"}),
        record("What year was it founded?", "1521", ["images/b.png", "images/a.png"],
               titles=["only title"],
               thumbs=[base64.b64encode(png_bytes((1, 2, 3), (8, 8))).decode()], level="L2"),
        record("No search data here?", ["yes"], ["images/a.png"], evidence_steps=3),
    ]
    path = data_dir / "vistahop.json"
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return path
