"""``jsonl``: your own tasks from a JSON Lines, JSON, CSV, TSV or Parquet file, or a hub dataset,
each scored by the scorer it names (fasteval.suites.scorers; docs/own-tasks.md).

``path`` is a local file (images relative to its folder, inside it unless ``allow_image_root``
says otherwise); ``source: hf://datasets/ORG/NAME`` (with ``revision``, ``split``, ``subset`` or
``data_files``) downloads the split's data files into the data cache, checked and locked, and
reads them the same way. Fields are found by name (fasteval.suites.task_fields; ``fields``
renames them). A row that cannot be used becomes one LoadError naming the row and why; the
other rows run. A record's ``score_details.scorer`` names the scorer that gave its score.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasteval.core.options import Opt
from fasteval.core.types import Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.row_checks import image_roots
from fasteval.suites.scorers import Check, ScoreEnv, Scorers, ScorerSpec, parse_spec
from fasteval.suites.task_fields import FieldMap, ImageRefs, RowContext, RowError, build_task
from fasteval.suites.task_files import TASK_FILE_SUFFIXES, Row, read_rows
from fasteval.suites.task_images import ImageReader

if TYPE_CHECKING:
    from fasteval.suites.hub.loop_thread import LoopThread

log = logging.getLogger(__name__)
DEFAULT_JUDGE_ROLE = "judge"


@register_suite
class JsonlSuite(Suite):
    """Your own tasks (JSONL, CSV, Parquet or a hub dataset), each scored by its named scorer."""

    name = "jsonl"
    options_schema = {
        "path": Opt("path", f"the task file ({', '.join(TASK_FILE_SUFFIXES)}); this or source", exists=True),
        "source": Opt("str", "hf://datasets/ORG/NAME[@REVISION]: a hub dataset instead of path"),
        "revision": Opt("str", "source: a branch, tag or commit (default main)"),
        "split": Opt("str", "source: the split to read (default: the only one)"),
        "subset": Opt("str", "source: the subset (configuration) folder"),
        "data_files": Opt("str_list", "source: glob(s) of the data files to read, instead of split/subset"),
        "fields": Opt("dict", "your column for each field: id, prompt, turns, images, answer, options, scorer, "
                              "tools, metadata (images and metadata may list several columns)"),
        "scorer": Opt("any", "the scorer of tasks that name none: a name or {name, options...} (default exact)"),
        "judge": Opt("str", f"the role judge-scored tasks ask (default {DEFAULT_JUDGE_ROLE})"),
        "options_in_prompt": Opt("bool", "append a task's options (A. ..., B. ...) to its prompt (default true)"),
        "limit": Opt("int", "first N rows"),
        "allow_image_root": Opt("path", "another folder image paths may lead into"),
        "cache_dir": Opt("path", "where hub datasets and image URLs are kept (default $FASTEVAL_CACHE_DIR/data)"),
        "max_rounds": Opt("int", "rounds of the default setting"),
    }
    setting_options = {}

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        super().__init__(options, blobs)
        source, path = options.get("source"), options.get("path")
        if source and path:
            raise ValueError("jsonl: give 'path' (a file) or 'source' (hf://datasets/...), not both")
        if not source and not path:
            raise ValueError("jsonl: 'path' (a task file) or 'source' (hf://datasets/ORG/NAME) is required")
        if source:
            from fasteval.suites.hub.datasets import parse_source

            parse_source(str(source))
        self.fields = FieldMap.from_option(options.get("fields"))
        self.default_scorer: ScorerSpec = parse_spec(options.get("scorer") or "exact")
        self.judge_role = str(options.get("judge") or DEFAULT_JUDGE_ROLE)
        self.scorers = Scorers()
        self.scorers.get(self.default_scorer)
        self.dataset_identity: dict[str, Any] = {}

    def roles_needed(self, setting: Setting) -> frozenset[str]:
        return self.scorers.roles(self.judge_role)

    def default_settings(self) -> list[Setting]:
        return [Setting(name="default", max_rounds=int(self.options.get("max_rounds", 10)))]

    def text_manifest(self) -> dict[str, Any] | None:
        """Which data the tasks came from (a hub source's commit), for the run's manifest."""
        return {"source": "own", "data": self.dataset_identity} if self.dataset_identity else None

    def load(self) -> Iterator[Task | LoadError]:
        with ExitStack() as stack:
            files = self._files(stack)
            if isinstance(files, LoadError):
                yield files
                return
            reader, tables = files
            limit = self.options.get("limit")
            count = 0
            for local, repo_path in tables:
                ctx = RowContext(self.fields, _image_refs(reader, local.parent, repo_path), self.scorers,
                                 self.default_scorer, bool(self.options.get("options_in_prompt", True)),
                                 text_cells=local.suffix.lower() in (".csv", ".tsv"))
                label = repo_path or local.name
                try:
                    rows = read_rows(local)
                    for row in rows:
                        if limit is not None and count >= int(limit):
                            return
                        count += 1
                        yield self._item(row, label, ctx, len(tables) > 1)
                except ValueError as e:  # the file itself (not one row) cannot be read
                    yield LoadError(task_id=f"{label}-load", message=_one_line(e))

    def _files(self, stack: ExitStack) -> tuple[ImageReader, list[tuple[Path, str | None]]] | LoadError:
        """The image reader and the data files to read: (local file, its path in the hub repo or None)."""
        from fasteval.suites.hub.loop_thread import LoopThread
        from fasteval.suites.hub.settings import data_cache_root
        from fasteval.suites.hub.web_images import UrlImages

        cache = Path(str(self.options["cache_dir"])) if self.options.get("cache_dir") else data_cache_root()
        loop = stack.enter_context(LoopThread())
        urls = stack.enter_context(UrlImages(loop, cache))
        if not self.options.get("source"):
            path = Path(str(self.options["path"]))
            if not path.is_file():
                return LoadError(task_id=str(path), message=f"jsonl suite: file {path} does not exist")
            return ImageReader(self.blobs, image_roots(self.options, path.parent), urls=urls.get), [(path, None)]
        return self._hub_files(stack, loop, cache, urls.get)

    def _hub_files(self, stack: ExitStack, loop: LoopThread, cache: Path,
                   urls: Callable[[str], bytes]) -> tuple[ImageReader, list[tuple[Path, str | None]]] | LoadError:
        from fasteval.suites.hub.datasets import HubDataset, parse_source, split_files
        from fasteval.suites.hub.settings import HubError

        dataset = HubDataset(parse_source(str(self.options["source"])), cache, loop,
                             revision=self.options.get("revision"), report=log.info)
        stack.callback(dataset.close)
        patterns = tuple(self.options.get("data_files") or ())
        try:
            listing = dataset.resolve()
            wanted = split_files(listing, self.options.get("split"), self.options.get("subset"), patterns)
            local = dataset.fetch(wanted)
        except (HubError, ValueError) as e:
            return LoadError(task_id=f"{dataset.source.repo}-load", message=f"{dataset.uri}: {_one_line(e)}")
        self.dataset_identity = {"uri": dataset.uri, "commit": dataset.commit, "files": wanted}
        reader = ImageReader(self.blobs, image_roots(self.options, dataset.folder), urls=urls,
                             repo_file=dataset.repo_file)
        return reader, list(zip(local, wanted, strict=True))

    def _item(self, row: Row, label: str, ctx: RowContext, several: bool) -> Task | LoadError:
        default_id = row.where.replace(" ", "-") if not several else f"{label}:{row.where.replace(' ', '-')}"
        if row.fields is None:
            return LoadError(task_id=default_id, message=f"{label}: {row.where}: {row.error}")
        try:
            task = build_task(row.fields, default_id, ctx)
        except RowError as e:
            tid = _row_id(row.fields, ctx.fields, default_id)
            message = f"{label}: {row.where}{'' if tid == default_id else f' (id {tid})'}: {_one_line(e)}"
            log.warning("jsonl: %s", message)
            return LoadError(task_id=tid, message=message)
        except (TypeError, KeyError, AttributeError, ValueError) as e:
            # A row problem no check above foresaw: still this row's error, never the file's.
            return LoadError(task_id=default_id, message=f"{label}: {row.where}: {type(e).__name__}: {_one_line(e)}")
        return task

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        spec = parse_spec(task.metadata.get("scorer") or "exact")
        scorer = self.scorers.get(spec)
        env = ScoreEnv(ctx.services, self.judge_role)
        options = task.metadata.get("options") or {}
        graded = [(t, a) for t, a in zip(task.turns, [*trajectory.answers, *[None] * len(task.turns)], strict=False)
                  if t.reference is not None or spec.name == "judge"]
        per_turn: list[float | None] = []
        checks: list[dict[str, Any]] = []
        error = None
        for turn, answer in graded:
            if answer is None:  # the model never answered this turn (rounds ran out): wrong, not a scorer's call
                per_turn.append(0.0)
                checks.append({"answer": None})
                continue
            verdict = await scorer.grade(Check(answer, turn.reference, turn.text, options), env)
            per_turn.append(verdict.value)
            checks.append(verdict.details)
            error = error or verdict.error
        details: dict[str, Any] = {"scorer": spec.label, "per_turn": per_turn, "checks": checks}
        if error is not None:
            return Score(None, details, error=error)
        values = [v for v in per_turn if v is not None]
        return Score(sum(values) / len(graded) if graded else 0.0, details)


def _image_refs(reader: ImageReader, base: Path, repo_path: str | None) -> ImageRefs:
    """The image reader for one data file: paths are relative to its folder (in the hub repo too)."""
    def refs(value: Any, field: str) -> list[str]:
        return reader.refs(value, base, repo_path, field)

    return refs


def _row_id(row: dict[str, Any], fields: FieldMap, default: str) -> str:
    value = fields.get(row, "id")
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) and value != "" else default


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 500 else text[:500] + "…"
