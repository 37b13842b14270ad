"""Make the sibling ``releases`` module (synthetic releases in each official format) importable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fasteval.runfolder.blobs import BlobStore

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")

