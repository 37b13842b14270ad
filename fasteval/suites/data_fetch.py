"""``fasteval data fetch NAME --dest DIR``: put a benchmark's official files where its loader reads them.

Loaders never touch a hub at run time; they read the local path given in the config. This module
is the one place that downloads a benchmark: over the hub's HTTP API (fasteval.suites.hub, on
aiohttp, a base dependency), resuming partial files, checking every file against the hub's
checksums and writing ``fasteval.lock.json`` beside the data, which later fetches verify
against. ``HF_ENDPOINT`` (a mirror), ``HF_HUB_OFFLINE`` and ``HF_TOKEN`` are honoured. When the
hub cannot be reached, ``FetchError`` says in one line what to do, and which repository to get
and where each file goes, so the files can be copied by hand.

| name | source | after fetch, ``suites[].options.path`` |
|---|---|---|
| ``tirbench`` | HF dataset ``Agents-X/TIR-Bench``: ``TIR-Bench.json`` + ``data.zip`` (unzipped to ``data/``) | DEST |
| ``visualtoolbench`` | HF dataset ``ScaleAI/VisualToolBench``: the ``test`` split parquet | DEST |
| ``vistahop`` | GitHub ``ahang0712/vistahop``: ``data/subset1.parquet`` (Git LFS); no HF dataset | manual only |
| ``vstar`` | HF dataset ``craigwu/vstar_bench``: ``direct_attributes/``, ``relative_position/`` | DEST |
| ``hrbench`` | HF dataset ``DreamMr/HR-Bench``: ``hr_bench_{4k,8k}.tsv`` (or ``.parquet``) | DEST |
| ``mme-realworld`` | HF dataset ``yifanzhang114/MME-RealWorld``: the JSONs + split image archives (unpacked by hand) | DEST |
| ``treebench`` | HF dataset ``HaochenWang/TreeBench``: ``TreeBench.tsv`` | DEST/TreeBench.tsv |
| ``visualprobe`` | HF datasets ``Mini-o3/VisualProbe_{Easy,Medium,Hard}``: ``val.json`` + ``data/``, each into ``DEST/VisualProbe_<Level>`` | DEST |

The reference harnesses themselves (their prompts, tool texts and judge templates are read from
them at run time under ``texts: reference``) are fetched with ``git`` at a pinned commit into
``DEST/reference/<repo>``, where the shipped configs' ``reference_repo`` options look:

| name | repository | pinned commit |
|---|---|---|
| ``tirbench-reference`` | ``agents-x-project/TIR-Bench`` | ``f79c7562`` |
| ``visualtoolbench-reference`` | ``xi1ngang/VisualToolBench`` | ``d4f200a0`` |
| ``vistahop-reference`` | ``ahang0712/vistahop`` | ``1d6a961f`` |
| ``vlmevalkit-reference`` | ``open-compass/VLMEvalKit`` | ``e8e78f05`` |
| ``mini-o3-reference`` | ``Mini-o3/Mini-o3`` | ``8654dbf4`` |
| ``deepeyes-reference`` | ``Visual-Agent/DeepEyes`` | ``6c5e7967`` |
| ``treevgr-reference`` | ``Haochen-Wang409/TreeVGR`` | ``4823ad88`` |
| ``hrbench-reference`` | ``DreamMr/HR-Bench`` | ``b17b1998`` |
| ``lmms-eval-reference`` | ``EvolvingLMMs-Lab/lmms-eval`` | ``75571cfe`` |
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fasteval.suites.hub.lock import DataLock
    from fasteval.suites.hub.settings import HubSettings

from fasteval.core.errors import BadInput, UsageError


class FetchError(RuntimeError, UsageError):
    """The files could not be fetched here; the message says how to get them by hand (one line, exit 2)."""


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
    parts: tuple[tuple[str, str], ...] = ()
    """(repo id, subfolder) pairs for a benchmark published as several datasets, each fetched into
    ``DEST/subfolder`` (VisualProbe: one dataset per level)."""


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
    "vstar": DatasetSource(
        name="vstar", repo_id="craigwu/vstar_bench", hub="huggingface",
        allow_patterns=("direct_attributes/*", "relative_position/*", "test_questions.jsonl"),
        manual=("download the folders direct_attributes/ and relative_position/ (image + JSON pairs) from "
                "https://huggingface.co/datasets/craigwu/vstar_bench into {dest}"),
        path_hint="{dest}"),
    "hrbench": DatasetSource(
        name="hrbench", repo_id="DreamMr/HR-Bench", hub="huggingface",
        allow_patterns=("hr_bench_4k.tsv", "hr_bench_8k.tsv"),
        manual=("download hr_bench_4k.tsv (1.9 GB) and hr_bench_8k.tsv (4.6 GB), or the .parquet files, from "
                "https://huggingface.co/datasets/DreamMr/HR-Bench into {dest}"),
        path_hint="{dest}"),
    "mme-realworld": DatasetSource(
        name="mme-realworld", repo_id="yifanzhang114/MME-RealWorld", hub="huggingface",
        allow_patterns=("*.json", "*.zip", "*.z*"),
        manual=("download MME_RealWorld.json (and MME_RealWorld_CN.json) with the split image archives from "
                "https://huggingface.co/datasets/yifanzhang114/MME-RealWorld into {dest} and unpack the images "
                "there (paths in the JSON's Image field are relative to {dest}); Lite: mme_realworld_lite.tsv "
                "from yifanzhang114/MME-RealWorld-Base64"),
        path_hint="{dest}"),
    "treebench": DatasetSource(
        name="treebench", repo_id="HaochenWang/TreeBench", hub="huggingface", allow_patterns=("TreeBench.tsv",),
        manual="download TreeBench.tsv from https://huggingface.co/datasets/HaochenWang/TreeBench into {dest}",
        path_hint="{dest}/TreeBench.tsv"),
    "visualprobe": DatasetSource(
        name="visualprobe", repo_id="Mini-o3/VisualProbe_{Easy,Medium,Hard}", hub="huggingface",
        allow_patterns=("val.json", "data/*"),
        manual=("download val.json and data/ of each of https://huggingface.co/datasets/Mini-o3/VisualProbe_Easy, "
                "_Medium and _Hard into {dest}/VisualProbe_Easy, {dest}/VisualProbe_Medium, {dest}/VisualProbe_Hard"),
        path_hint="{dest}",
        parts=tuple((f"Mini-o3/VisualProbe_{level}", f"VisualProbe_{level}") for level in ("Easy", "Medium", "Hard"))),
}

DEFAULT_DEST: dict[str, str] = {"tirbench": "data/TIR-Bench", "visualtoolbench": "data/VisualToolBench",
                                "vistahop": "data/vistahop", "vstar": "data/vstar_bench", "hrbench": "data/HR-Bench",
                                "mme-realworld": "data/MME-RealWorld", "treebench": "data/TreeBench",
                                "visualprobe": "data/VisualProbe"}
"""Where ``fetch`` puts each benchmark without ``--dest``: under the checkout's ``data/``, which is where
the shipped configs (``configs/*.yaml``, paths relative to their folder: ``../data/...``) read them."""


def default_dest(name: str) -> Path:
    """The folder the configs read benchmark ``name`` from: ``data/`` beside the ``configs/`` of the
    current folder (a checkout or a project laid out like one), else of fasteval's own checkout,
    else ``./data/``."""
    here = Path.cwd()
    root = Path(__file__).resolve().parents[2]
    base = here if (here / "configs").is_dir() else root if (root / "configs").is_dir() else here
    return base / DEFAULT_DEST[source(name).name]


ALIASES = {"tir-bench": "tirbench", "tir_bench": "tirbench", "vtb": "visualtoolbench",
           "visual-tool-bench": "visualtoolbench", "vista-hop": "vistahop", "v*": "vstar", "vstar-bench": "vstar",
           "hr-bench": "hrbench", "mme_realworld": "mme-realworld", "mmerealworld": "mme-realworld",
           "tree-bench": "treebench", "visual-probe": "visualprobe"}


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
        ReferenceRepo("vlmevalkit-reference", "open-compass/VLMEvalKit", "e8e78f05f3080fe28154f2130321f17951c3be94"),
        ReferenceRepo("mini-o3-reference", "Mini-o3/Mini-o3", "8654dbf42d2ea98b9d81b6cc7179026dd0598fdf"),
        ReferenceRepo("deepeyes-reference", "Visual-Agent/DeepEyes", "6c5e79671dbff958a6f9d44848ba2ca87854f0b0"),
        ReferenceRepo("treevgr-reference", "Haochen-Wang409/TreeVGR", "4823ad8860f13b5eac360bba592f7c3442c6e04c"),
        ReferenceRepo("hrbench-reference", "DreamMr/HR-Bench", "b17b1998fa2c1b71a737c126155826a94149ed13"),
        ReferenceRepo("lmms-eval-reference", "EvolvingLMMs-Lab/lmms-eval", "75571cfe0fa36ca5ec2e6aa2bb268f9d38295af3"),
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
        raise BadInput(f"unknown dataset {name!r}; known: {sorted(DATASETS) + sorted(REFERENCE_REPOS)}")
    return DATASETS[key]


def fetch(name: str, dest: Path | None = None, *, revision: str | None = None, update: bool = False,
          report: Callable[[str], None] | None = None, settings: HubSettings | None = None,
          split: str | None = None, subset: str | None = None) -> Path:
    """Download benchmark ``name`` into ``dest`` and return the path to put in the config.

    Files already there that match the lock file are kept (no network needed); missing ones are
    downloaded (a partial one resumed) and checked. Raises ``FetchError`` with one line saying
    what went wrong and how to get the files by hand (VistaHop, which is not on the hub, always).
    """
    if name.lower() in REFERENCE_REPOS:
        return fetch_reference(name.lower(), Path(dest) if dest is not None else Path("data"), revision=revision)
    if name.startswith("hf://"):
        return fetch_hub_source(name, dest, revision=revision, split=split, subset=subset, report=report)
    src = source(name)
    dest = Path(dest) if dest is not None else default_dest(name)
    manual = src.manual.format(dest=dest)
    hint = src.path_hint.format(dest=dest)
    if src.hub != "huggingface":
        raise FetchError(f"{src.name}: cannot be fetched automatically ({src.hub} {src.repo_id}): {manual}; "
                         f"then set the suite's path option to {hint}")
    # Here, not at the top: the table above is read by ``--help`` and the config checks.
    from fasteval.suites.hub.fetcher import folder_lock
    from fasteval.suites.hub.lock import DataLock, LockError, read_lock
    from fasteval.suites.hub.loop_thread import run_blocking
    from fasteval.suites.hub.settings import HubError, HubSettings

    settings = settings or HubSettings.from_env()
    try:
        with folder_lock(dest):
            lock = read_lock(dest) or DataLock(src.name)
            run_blocking(_fetch_parts(src, dest, lock, settings, revision, update, report))
    except (HubError, LockError) as e:
        raise FetchError(f"{src.name}: {e}. By hand: {manual}") from None
    except OSError as e:
        raise FetchError(f"{src.name}: cannot write to {dest} ({e.strerror or e})") from None
    if src.name == "tirbench":
        _unzip_images(dest)
    return Path(hint)


def fetch_hub_source(uri: str, cache_dir: Path | None = None, *, revision: str | None = None,
                     split: str | None = None, subset: str | None = None,
                     report: Callable[[str], None] | None = None) -> Path:
    """Put a ``jsonl`` suite's ``hf://datasets/...`` split into the data cache now (on a login node
    with a network, say, for compute nodes that run with HF_HUB_OFFLINE=1); returns the commit's
    folder in the cache. Images the rows name by path (rather than embed) are fetched when the rows
    load: ``fasteval run CONFIG --dry-run`` with the network fetches them too."""
    from fasteval.suites.hub.datasets import HubDataset, parse_source, split_files
    from fasteval.suites.hub.loop_thread import LoopThread
    from fasteval.suites.hub.settings import HubError, data_cache_root

    try:
        hub_source = parse_source(uri)
    except ValueError as e:
        raise FetchError(str(e)) from None
    with LoopThread() as loop:
        dataset = HubDataset(hub_source, Path(cache_dir) if cache_dir else data_cache_root(), loop,
                             revision=revision, report=report)
        try:
            files = split_files(dataset.resolve(), split, subset)
            dataset.fetch(files)
        except (HubError, ValueError) as e:
            raise FetchError(f"{uri}: {e}") from None
        finally:
            dataset.close()
    if report is not None:
        report(f"{uri}: commit {dataset.commit[:12]}, {len(files)} data file(s) in the cache")
    return dataset.folder


async def _fetch_parts(src: DatasetSource, dest: Path, lock: DataLock, settings: HubSettings, revision: str | None,
                       update: bool, report: Callable[[str], None] | None) -> None:
    """Each repository of the benchmark in turn, the lock rewritten after each one that completes."""
    from fasteval.suites.hub.client import HubClient
    from fasteval.suites.hub.fetcher import FetchPlan, fetch_repo
    from fasteval.suites.hub.lock import write_lock

    async with HubClient(settings) as hub:
        for repo_id, sub in src.parts or ((src.repo_id, ""),):
            plan = FetchPlan(repo_id, revision, dest / sub if sub else dest, sub, src.allow_patterns, update)
            entry = await fetch_repo(hub, plan, lock.find(repo_id, sub), report or (lambda _: None))
            lock.put(entry)
            write_lock(dest, lock)


MAX_UNZIP_BYTES = 64 << 30
"""TIR-Bench's images are a few GB; more than this from one archive is not a dataset."""
MAX_UNZIP_RATIO = 100
"""Images barely compress (PNG and JPEG are compressed already): a zip that expands a hundredfold
is a bomb (or not the dataset)."""
_CHUNK = 1 << 20


def _unzip_images(dest: Path, *, max_bytes: int = MAX_UNZIP_BYTES, max_ratio: float = MAX_UNZIP_RATIO) -> None:
    """Unzip TIR-Bench's data.zip next to TIR-Bench.json (once), refusing paths that leave ``dest``.

    Bytes are counted as they are written (a member's declared size can lie), and extraction
    stops past ``max_bytes`` or ``max_ratio`` times the archive's size. It goes to a temporary
    folder first, so a stopped extraction leaves nothing that looks like a finished one.
    """
    archive = dest / "data.zip"
    if not (dest / "TIR-Bench.json").is_file() or not archive.is_file():
        raise FetchError(f"tirbench: expected TIR-Bench.json and data.zip in {dest} after the download")
    if (dest / "data").is_dir():
        return
    root = dest.resolve()
    cap = min(max_bytes, int(max_ratio * max(archive.stat().st_size, 1)))
    tmp = root / ".unzip-partial"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            for info in infos:
                target = (root / info.filename).resolve()
                if target != root and root not in target.parents:
                    raise FetchError(f"tirbench: {archive} holds a path outside {dest}: {info.filename!r}")
            written = 0
            for info in infos:
                out = tmp / info.filename
                if info.is_dir():
                    out.mkdir(parents=True, exist_ok=True)
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, out.open("wb") as dst:
                    while chunk := src.read(_CHUNK):
                        written += len(chunk)
                        if written > cap:
                            why = (f"more than {max_bytes:,} bytes" if cap == max_bytes else
                                   f"more than {max_ratio:g} times the archive's {archive.stat().st_size:,} bytes")
                            raise FetchError(f"tirbench: stopped extracting {archive} at {info.filename!r}: it "
                                             f"expands to {why} (a zip bomb, or not the dataset); nothing was kept. "
                                             "Unzip it by hand if you trust it")
                        dst.write(chunk)
        for entry in tmp.iterdir():
            os.replace(entry, root / entry.name)
    except (zipfile.BadZipFile, OSError) as e:
        raise FetchError(f"tirbench: cannot extract {archive} ({e})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
