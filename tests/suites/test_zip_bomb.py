"""``data.zip`` is extracted with a size and a ratio cap (issue 21, item 10).

A 40 KB archive that expands to 40 MB (a thousandfold) is stopped with a message that says why,
and nothing of it is kept: a rerun does not mistake a half-extracted ``data/`` for a finished one.
"""

from __future__ import annotations

import io
import random
import zipfile
from pathlib import Path

import pytest

from fasteval.suites.data_fetch import FetchError, _unzip_images


def _dataset(tmp_path: Path, members: dict[str, bytes]) -> Path:
    dest = tmp_path / "TIR-Bench"
    dest.mkdir()
    (dest / "TIR-Bench.json").write_text("[]")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    (dest / "data.zip").write_bytes(buf.getvalue())
    return dest


def test_a_zip_that_expands_a_thousandfold_is_stopped_and_leaves_nothing(tmp_path: Path) -> None:
    dest = _dataset(tmp_path, {"data/a/1.png": b"\x89PNG" + b"\0" * 64, "data/a/bomb.png": b"\0" * (40 << 20)})
    assert (dest / "data.zip").stat().st_size < 100_000
    with pytest.raises(FetchError, match=r"stopped extracting .*bomb\.png.*more than 100 times"):
        _unzip_images(dest)
    assert sorted(p.name for p in dest.iterdir()) == ["TIR-Bench.json", "data.zip"]


def test_the_size_cap_holds_even_when_the_ratio_is_fine(tmp_path: Path) -> None:
    noise = random.Random(0).randbytes(300_000)  # does not compress
    dest = _dataset(tmp_path, {"data/x.bin": noise})
    with pytest.raises(FetchError, match=r"more than 100,000 bytes"):
        _unzip_images(dest, max_bytes=100_000)
    assert not (dest / "data").exists()
    _unzip_images(dest)
    assert (dest / "data" / "x.bin").read_bytes() == noise
