"""What every exporter reads of a run folder, the same way: its groups, records, scores, images, cost.

A run folder is read as ``report`` reads it: through the run index, one record at a time (the
index says where each job's latest record lives). Exporters see a record through
``fasteval.view.shape.viewable``, so a hand-edited or foreign record (a trajectory that is a
string, a ``usage`` that is a list) exports what is there instead of failing the export.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fasteval.core.errors import UsageError
from fasteval.core.pricing import Price, cost_usd, model_prices
from fasteval.core.version import fasteval_version
from fasteval.runfolder.blobs import open_blob
from fasteval.runfolder.index import RunIndex
from fasteval.runfolder.names import BLOBS
from fasteval.runfolder.records import read_manifest
from fasteval.view.shape import viewable
from providers import price_terms

Group = tuple[str, str, str]
"""(model, suite, setting): one inspect log, one leaderboard cell."""

TOKEN_KINDS = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


class ExportError(UsageError):
    """An export that cannot start (not a run folder, an output that exists): one line, exit 2."""


@dataclass(frozen=True, slots=True)
class Selection:
    """Which jobs an export takes (``--model``, ``--suite``): every one when a list is empty."""

    models: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()

    def filters(self) -> dict[str, Any]:
        return {k: list(v) for k, v in (("model", self.models), ("suite", self.suites)) if v}


@dataclass(slots=True)
class RunInfo:
    """The run-level facts every format carries: where it came from and whether it is whole."""

    run_dir: Path
    manifest: dict[str, Any]
    prices: dict[str, Price | None] = field(default_factory=dict)
    planned: int | None = None
    """Jobs the run's plan holds (the manifest's total), None when it does not say."""
    recorded: int = 0
    """Jobs with a record in the whole run (not only the selection)."""

    @property
    def partial(self) -> bool:
        """The run has planned jobs without a record: its numbers are a partial run's."""
        return self.planned is not None and self.recorded < self.planned

    @property
    def config_hash(self) -> str | None:
        value = self.manifest.get("config_hash")
        return str(value) if value is not None else None

    def provenance(self) -> dict[str, Any]:
        """Our ids for a run, as each format's metadata carries them."""
        return {"run": self.run_dir.name, "run_dir": str(self.run_dir), "config_hash": self.config_hash,
                "fasteval_version": fasteval_version(), "partial": self.partial}

    def cost(self, model: str, usage: dict[str, Any]) -> float | None:
        """USD of one job's tokens at its model's price; None when the model has no price."""
        price = self.prices.get(model)
        return round(cost_usd(usage, price), 8) if price is not None else None


def run_info(run_dir: Path, index: RunIndex) -> RunInfo:
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise ExportError(f"{run_dir} is not a run folder (no manifest.json)")
    plan = manifest.get("plan") or {}
    planned = int(plan["total"]) if isinstance(plan.get("total"), int) else None
    config = manifest.get("config") or {}
    return RunInfo(run_dir, manifest, model_prices(config, price_terms) if isinstance(config, dict) else {},
                   planned, index.count())


def groups(index: RunIndex, selection: Selection) -> list[Group]:
    """The run's model × suite × setting groups within the selection, sorted."""
    models, suites = set(selection.models), set(selection.suites)
    return sorted(g for g in index.group_sizes() if (not models or g[0] in models) and (not suites or g[1] in suites))


def records(index: RunIndex, **filters: Any) -> Iterator[dict[str, Any]]:
    """Each matching job's latest record, shaped for reading (``viewable``), in file order."""
    for rec in index.iter_records(**filters):
        yield viewable(rec)


def scores_of(rec: dict[str, Any]) -> dict[str, float]:
    """A record's scores by scorer: ``fasteval`` (the record's score), and the suite's own side by
    side where it has them (``score_details.scores``: ``reference``, ``fixed``). None for an error."""
    if rec.get("status") != "ok":
        return {}
    out: dict[str, float] = {}
    if _number(rec.get("score")):
        out["fasteval"] = float(rec["score"])
    both = (rec.get("score_details") or {}).get("scores")
    if isinstance(both, dict):
        out.update((str(k), float(v)) for k, v in both.items() if _number(v))
    return out


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def usage_of(rec: dict[str, Any]) -> dict[str, int]:
    """The record's token counts (0 for a kind it does not report or that is not a count)."""
    usage = rec.get("usage") or {}
    return {k: int(v) if _number(v) else 0 for k, v in usage.items()}


def image_tokens(rec: dict[str, Any]) -> int:
    """Prompt tokens that stood for images (vLLM reports them per turn; 0 where nobody said)."""
    return sum(int(u["image_tokens"]) for u in rec["trajectory"]["usage_by_turn"] if _number(u.get("image_tokens")))


# First bytes of each image format the exports name (ATIF allows these four).
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
          (b"GIF89a", "image/gif"))


def media_type(head: bytes) -> str | None:
    """The MIME type of an image from its first bytes; None for a format we do not name."""
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def read_image(run_dir: Path, ref: object) -> bytes | None:
    """A blob's bytes; None for a reference that is not a blob, a missing blob or a link (refused)."""
    try:
        with os.fdopen(open_blob(run_dir / BLOBS, ref), "rb") as f:
            return f.read()
    except (OSError, ValueError, UsageError):
        return None


def content_parts(content: Any) -> list[tuple[str, str]]:
    """A message's content as ``("text", text)`` and ``("image", ref)`` parts, in order."""
    if content is None:
        return []
    if isinstance(content, str):
        return [("text", content)]
    if not isinstance(content, list):
        return [("text", str(content))]
    out: list[tuple[str, str]] = []
    for part in content:
        if not isinstance(part, dict):
            out.append(("text", str(part)))
        elif part.get("type") == "image":
            out.append(("image", str(part.get("image"))))
        elif part.get("type") == "text":
            out.append(("text", str(part.get("text") or "")))
    return out


def text_of(content: Any) -> str:
    """Only the text of a message's content (images dropped)."""
    return "".join(t for kind, t in content_parts(content) if kind == "text")


_UNSAFE = re.compile(r"[^A-Za-z0-9._@+=-]+")


def file_part(text: str, limit: int = 80) -> str:
    """``text`` as one safe path component (model names hold ``/``; task ids anything)."""
    cleaned = _UNSAFE.sub("_", text).strip("._") or "_"
    return cleaned[:limit]


@contextlib.contextmanager
def output_place(out: Path, *, force: bool) -> Iterator[Path]:
    """A temporary place beside ``out`` to write into, renamed to ``out`` when the export succeeds.

    A failed or interrupted export leaves nothing at ``out`` (and no stale file from an earlier
    export survives a new one); an existing ``out`` is replaced only with ``force``.
    """
    if (out.exists() or out.is_symlink()) and not force:
        raise ExportError(f"{out} exists: pass --force to replace it, or another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.export-{os.getpid()}")
    _remove(tmp)
    try:
        yield tmp
        if out.exists() or out.is_symlink():
            _remove(out)
        os.replace(tmp, out)
    finally:
        _remove(tmp)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def selected_count(index: RunIndex, selection: Selection) -> int:
    return index.count(**selection.filters())


def jsonable_metadata(meta: Any, keep: Sequence[str] = ()) -> dict[str, Any]:
    """A record's task metadata as scalars (a foreign record may hold anything there)."""
    if not isinstance(meta, dict):
        return {}
    return {str(k): v for k, v in meta.items() if isinstance(v, str | int | float | bool) or v is None or k in keep}
