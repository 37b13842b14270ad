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


@pytest.fixture(autouse=True)
def _twi_reference_repos(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Synthetic checkouts of VLMEvalKit and Mini-o3 (tests/reference_repos.py) as the default
    ``reference_repo`` of the judge texts."""
    import reference_repos

    from fasteval.suites.mcq import judge as mcq_judge
    from fasteval.suites.visualprobe import judge as vp_judge

    root = tmp_path_factory.getbasetemp() / "twi-reference"
    if not root.exists():
        reference_repos.write_vlmevalkit(root / "VLMEvalKit")
        reference_repos.write_mini_o3(root / "Mini-o3")
    monkeypatch.setattr(mcq_judge, "DEFAULT_REFERENCE_REPO", str(root / "VLMEvalKit"))
    monkeypatch.setattr(vp_judge, "DEFAULT_REFERENCE_REPO", str(root / "Mini-o3"))
