"""``fasteval data fetch NAME --dest DIR``: put a benchmark's official files where its loader reads them.

Loaders never touch a hub at run time; they read the local path given in the config. This module
is the one place that downloads, with ``huggingface_hub.snapshot_download`` when that package is
installed and a network exists (it is imported lazily: it is not a dependency). Otherwise
``FetchError`` says which repository to get and where each file goes, so the files can be copied
by hand.

| name | source | after fetch, ``suites[].options.path`` |
|---|---|---|
| ``tirbench`` | HF dataset ``Agents-X/TIR-Bench``: ``TIR-Bench.json`` + ``data.zip`` (unzipped to ``data/``) | DEST |
| ``visualtoolbench`` | HF dataset ``ScaleAI/VisualToolBench``: the ``test`` split parquet | DEST |
| ``vistahop`` | GitHub ``ahang0712/vistahop``: ``data/subset1.parquet`` (Git LFS); no HF dataset | manual only |
"""

from __future__ import annotations

import importlib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class FetchError(RuntimeError):
    """The files could not be fetched; the message says how to get them by hand."""


@dataclass(frozen=True, slots=True)
class DatasetSource:
    name: str
    repo_id: str
    """``owner/name`` on the Hugging Face hub (repo_type dataset), or on GitHub for ``hub="github"``."""
    hub: str
    allow_patterns: tuple[str, ...]
    manual: str
    """How to lay the files out by hand; ``{dest}`` is the destination folder."""
    path_hint: str
    """What to write as the suite's ``path`` option; ``{dest}`` is the destination folder."""


DATASETS: dict[str, DatasetSource] = {
    "tirbench": DatasetSource(
        name="tirbench", repo_id="Agents-X/TIR-Bench", hub="huggingface",
        allow_patterns=("TIR-Bench.json", "data.zip"),
        manual=("download TIR-Bench.json and data.zip from https://huggingface.co/datasets/Agents-X/TIR-Bench "
                "(mirror: ModelScope evalscope/TIR-Bench) into {dest}, then unzip data.zip there so the images "
                "are under {dest}/data/"),
        path_hint="{dest}"),
    "visualtoolbench": DatasetSource(
        name="visualtoolbench", repo_id="ScaleAI/VisualToolBench", hub="huggingface",
        allow_patterns=("test*.parquet", "*/test*.parquet"),
        manual=("download the test split parquet (test.parquet, several GB) from "
                "https://huggingface.co/datasets/ScaleAI/VisualToolBench into {dest}; the reference repo's "
                "download_dataset.py export (data/{{single_turn,multi_turn}}/dataset.json + images) works too"),
        path_hint="{dest}"),
    "vistahop": DatasetSource(
        name="vistahop", repo_id="ahang0712/vistahop", hub="github",
        allow_patterns=("data/subset1.parquet",),
        manual=("there is no Hugging Face dataset: clone https://github.com/ahang0712/vistahop, run "
                "`git lfs pull --include data/subset1.parquet` (about 495 MB), and copy data/subset1.parquet "
                "(or the runner's JSON/JSONL records with their images) into {dest}"),
        path_hint="{dest}/subset1.parquet"),
}

DEFAULT_DEST: dict[str, str] = {"tirbench": "data/TIR-Bench", "visualtoolbench": "data/VisualToolBench",
                                "vistahop": "data/vistahop"}
"""Where ``fetch`` puts each benchmark without ``--dest``: under the checkout's ``data/``, which is where
the shipped configs (``configs/*.yaml``, paths relative to their folder: ``../data/...``) read them."""


def default_dest(name: str) -> Path:
    """The folder the shipped configs read benchmark ``name`` from (the checkout's data/, else ./data/)."""
    root = Path(__file__).resolve().parents[1]
    base = root if (root / "configs").is_dir() else Path.cwd()
    return base / DEFAULT_DEST[source(name).name]


ALIASES = {"tir-bench": "tirbench", "tir_bench": "tirbench", "vtb": "visualtoolbench",
           "visual-tool-bench": "visualtoolbench", "vista-hop": "vistahop"}


def source(name: str) -> DatasetSource:
    """The dataset entry for a suite name (or alias); ValueError naming the known ones otherwise."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    return DATASETS[key]


def _snapshot_download() -> Callable[..., Any] | None:
    try:
        module = importlib.import_module("huggingface_hub")
    except ImportError:
        return None
    fn = getattr(module, "snapshot_download", None)
    return fn if callable(fn) else None


def fetch(name: str, dest: Path | None = None, *, revision: str | None = None) -> Path:
    """Download benchmark ``name`` into ``dest`` and return the path to put in the config.

    Needs ``huggingface_hub`` and a network; without them (or for VistaHop, which is not on the
    hub) raises ``FetchError`` naming the repository and where to put the files by hand.
    """
    src = source(name)
    dest = Path(dest) if dest is not None else default_dest(name)
    manual = src.manual.format(dest=dest)
    if src.hub != "huggingface":
        raise FetchError(f"{src.name}: cannot be fetched automatically ({src.hub} {src.repo_id}): {manual}; "
                         f"then set the suite's path option to {src.path_hint.format(dest=dest)}")
    download = _snapshot_download()
    if download is None:
        raise FetchError(f"{src.name}: huggingface_hub is not installed (pip install huggingface_hub), so the "
                         f"dataset {src.repo_id} cannot be downloaded here. By hand: {manual}; then set the "
                         f"suite's path option to {src.path_hint.format(dest=dest)}")
    dest.mkdir(parents=True, exist_ok=True)
    try:
        download(repo_id=src.repo_id, repo_type="dataset", revision=revision, local_dir=str(dest),
                 allow_patterns=list(src.allow_patterns))
    except Exception as e:  # network, auth (gated dataset), missing revision: all end the same way
        raise FetchError(f"{src.name}: downloading the dataset {src.repo_id} failed ({type(e).__name__}: {e}). "
                         f"By hand: {manual}") from e
    if src.name == "tirbench":
        _unzip_images(dest)
    return Path(src.path_hint.format(dest=dest))


def _unzip_images(dest: Path) -> None:
    """Unzip TIR-Bench's data.zip next to TIR-Bench.json (once), refusing paths that leave ``dest``."""
    archive = dest / "data.zip"
    if not (dest / "TIR-Bench.json").is_file() or not archive.is_file():
        raise FetchError(f"tirbench: expected TIR-Bench.json and data.zip in {dest} after the download")
    if (dest / "data").is_dir():
        return
    root = dest.resolve()
    with zipfile.ZipFile(archive) as zf:
        for member in zf.namelist():
            target = (root / member).resolve()
            if target != root and root not in target.parents:
                raise FetchError(f"tirbench: {archive} holds a path outside {dest}: {member!r}")
        zf.extractall(root)
