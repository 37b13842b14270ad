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

The reference harnesses themselves (their prompts, tool texts and judge templates are read from
them at run time under ``texts: reference``) are fetched with ``git`` at a pinned commit into
``DEST/reference/<repo>``, where the shipped configs' ``reference_repo`` options look:

| name | repository | pinned commit |
|---|---|---|
| ``tirbench-reference`` | ``agents-x-project/TIR-Bench`` | ``f79c7562`` |
| ``visualtoolbench-reference`` | ``xi1ngang/VisualToolBench`` | ``d4f200a0`` |
| ``vistahop-reference`` | ``ahang0712/vistahop`` | ``1d6a961f`` |
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
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


@dataclass(frozen=True, slots=True)
class ReferenceRepo:
    """A reference harness on GitHub, pinned to the commit our text specs were written against."""

    name: str
    repo: str
    commit: str

    @property
    def folder(self) -> str:
        return self.repo.split("/", 1)[1]

    def dest(self, data_dir: Path) -> Path:
        return Path(data_dir) / "reference" / self.folder


REFERENCE_REPOS: dict[str, ReferenceRepo] = {
    r.name: r for r in (
        ReferenceRepo("tirbench-reference", "agents-x-project/TIR-Bench", "f79c7562b59e4f8142b0437fc725eb3ee1aec76c"),
        ReferenceRepo("visualtoolbench-reference", "xi1ngang/VisualToolBench",
                      "d4f200a0a44790349667bed09334ac88623074b2"),
        ReferenceRepo("vistahop-reference", "ahang0712/vistahop", "1d6a961f3ae11f373da153ebb43ab7176b66b84e"),
    )
}


def fetch_reference(name: str, data_dir: Path, *, revision: str | None = None,
                    url: str | None = None) -> Path:
    """Clone a reference harness at its pinned commit (or ``revision``) into ``data_dir/reference/``.

    Needs ``git`` and a network (``url`` overrides GitHub, e.g. a local mirror). An existing
    checkout is moved to the commit. Raises FetchError saying how to do it by hand.
    """
    ref = REFERENCE_REPOS[name]
    dest = ref.dest(data_dir)
    commit = revision or ref.commit
    source_url = url or f"https://github.com/{ref.repo}.git"
    by_hand = (f"by hand: git clone {source_url} {dest} && git -C {dest} checkout {commit}; or copy the "
               f"repository's files there (the suite reads them; reference_repo: {dest})")
    git = shutil.which("git")
    if git is None:
        raise FetchError(f"{name}: git is not installed; {by_hand}")
    try:
        if not (dest / ".git").exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([git, "clone", "--quiet", source_url, str(dest)], check=True, capture_output=True,
                           text=True, timeout=600)
        subprocess.run([git, "-C", str(dest), "-c", "advice.detachedHead=false", "checkout", "--quiet", commit],
                       check=True, capture_output=True, text=True, timeout=120)
    except subprocess.CalledProcessError as e:
        detail = (e.stderr or "").strip().splitlines()[-1:] or [str(e)]
        raise FetchError(f"{name}: git failed ({detail[0][:300]}); {by_hand}") from None
    except subprocess.TimeoutExpired:
        raise FetchError(f"{name}: git timed out; {by_hand}") from None
    return dest


def source(name: str) -> DatasetSource:
    """The dataset entry for a suite name (or alias); ValueError naming the known ones otherwise."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS) + sorted(REFERENCE_REPOS)}")
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
    if name.lower() in REFERENCE_REPOS:
        return fetch_reference(name.lower(), Path(dest) if dest is not None else Path("data"), revision=revision)
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
