"""``jsonl``: tasks from a user's own file, scored by exact or contains match.

One JSON object per line: ``id``, ``prompt`` (or ``turns``: [{"text", "images", "answer"}]),
``images`` (paths relative to the file, inside its folder unless ``allow_image_root`` says
otherwise), ``answer``, ``tools`` (a list of names), ``metadata`` (an object), ``match``
("exact"|"contains"). A bad line becomes a LoadError naming the line and field; the other
lines still run.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.options import Opt
from fasteval.core.types import Task, Trajectory, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.demo import normalise
from fasteval.suites.row_checks import PathOutsideRoot, confine, image_roots, is_scalar_answer, type_name

_RECENT_IMAGES = 8
_PATH_MEMO = 4096
"""Image paths whose refs are remembered while loading (a stat tells a reused file from a changed one)."""


class RowError(ValueError):
    pass


class _UnreadableImage(Exception):
    """An image file that cannot be read (its row's error); the blob store's own faults are not."""


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _turn(obj: Any, image_ref: Callable[[str], str], where: str) -> Turn:
    if not isinstance(obj, dict):
        raise RowError(f"{where}: expected an object, got {type_name(obj)}")
    text = obj.get("text", obj.get("prompt"))
    if not isinstance(text, str) or not text:
        raise RowError(f"{where}: 'prompt'/'text' must be a non-empty string")
    images = obj.get("images")
    if images is None:
        images = []
    if not isinstance(images, list):
        raise RowError(f"{where}: 'images' must be a list of paths, got {type_name(images)}")
    refs = []
    for i, img in enumerate(images):
        if not isinstance(img, str) or not img:
            raise RowError(f"{where}: 'images[{i}]' must be a path string, got {type_name(img)}")
        try:
            refs.append(image_ref(img))
        except PathOutsideRoot as e:
            raise RowError(f"{where}: 'images[{i}]': {e}") from None
        except _UnreadableImage as e:
            raise RowError(f"{where}: 'images[{i}]' {img[:200]!r} cannot be read ({e})") from None
    answer = obj.get("answer")
    if answer is not None and not is_scalar_answer(answer):
        raise RowError(f"{where}: 'answer' must be a string or a number, got {type_name(answer)}")
    return Turn(text=text, images=refs, reference=answer)


@register_suite
class JsonlSuite(Suite):
    """Your own tasks from a .jsonl file (prompt or turns, images, answer), scored by exact or contains match."""

    name = "jsonl"
    options_schema = {"path": Opt("path", "the .jsonl file: one task per line", required=True, exists=True),
                      "max_rounds": Opt("int", "rounds of the default setting")}
    setting_options = {}

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        super().__init__(options, blobs)
        self._recent: OrderedDict[tuple[int, bytes, bytes], tuple[bytes, str]] = OrderedDict()
        self._by_path: OrderedDict[tuple[Path, str], tuple[Path, tuple[int, int, int, int], str]] = OrderedDict()

    def _image_ref(self, base: Path, roots: tuple[Path, ...], img: str) -> str:
        """The blob ref of the image file ``img`` (relative to ``base``).

        Rows that name a file a recent row named cost one stat: no path resolution, no read, no
        hash (a 2,000-row dataset of one 500 KB image otherwise reads and compares 1 GB).
        """
        key = (base, img)
        hit = self._by_path.get(key)
        if hit is not None:
            resolved, ident, ref = hit
            try:
                if _identity(os.stat(resolved)) == ident:
                    self._by_path.move_to_end(key)
                    return ref
            except OSError:
                pass  # gone or changed since: resolve and read it again, which reports why
        resolved = confine(base / img, roots)
        try:
            with resolved.open("rb") as f:
                ident = _identity(os.fstat(f.fileno()))
                data = f.read()
        except OSError as e:
            raise _UnreadableImage(e.strerror or type(e).__name__) from None
        ref = self._put_image(data)  # a failure here is the run folder's disk, not the row's
        self._by_path[key] = (resolved, ident, ref)
        if len(self._by_path) > _PATH_MEMO:
            self._by_path.popitem(last=False)
        return ref

    def _put_image(self, data: bytes) -> str:
        """Store image bytes, skipping the hash and the write when a recent row had the same image:
        datasets often point many rows at one file. Only a few recent images are kept."""
        key = (len(data), data[:256], data[-256:])
        hit = self._recent.get(key)
        if hit is not None and hit[0] == data:
            return hit[1]
        ref = self.blobs.put(data)
        self._recent[key] = (data, ref)
        if len(self._recent) > _RECENT_IMAGES:
            self._recent.popitem(last=False)
        return ref

    def load(self) -> Iterator[Task | LoadError]:
        path = Path(str(self.options.get("path", "")))
        if not path.is_file():
            yield LoadError(task_id=f"{path}", message=f"jsonl suite: file {path} does not exist")
            return
        roots = image_roots(self.options, path.parent)
        with path.open("rb") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                tid = f"line-{lineno}"
                try:
                    row = orjson.loads(line)
                    if not isinstance(row, dict):
                        raise RowError(f"line {lineno}: expected a JSON object, got {type_name(row)}")
                    rid = row.get("id", tid)
                    if not isinstance(rid, str | int) or isinstance(rid, bool) or str(rid) == "":
                        raise RowError(f"line {lineno}: 'id' must be a string or an integer, got {type_name(rid)}")
                    tid = str(rid)
                    yield self._task(row, tid, path.parent, roots, lineno)
                except orjson.JSONDecodeError as e:
                    yield LoadError(task_id=tid, message=f"{path.name}: line {lineno}: not valid JSON ({_one_line(e)})")
                except RowError as e:
                    yield LoadError(task_id=tid, message=f"{path.name}: {_one_line(e)}")
                except (ValueError, TypeError, KeyError, AttributeError) as e:
                    # A row problem no check above foresaw: still this row's error, never the file's.
                    yield LoadError(task_id=tid, message=f"{path.name}: line {lineno}: {type(e).__name__}: "
                                                         f"{_one_line(e)}")

    def _task(self, row: dict[str, Any], tid: str, base: Path, roots: tuple[Path, ...], lineno: int) -> Task:
        where = f"line {lineno} (id {tid})"

        def image_ref(img: str) -> str:
            return self._image_ref(base, roots, img)

        if "turns" in row:
            if not isinstance(row["turns"], list) or not row["turns"]:
                raise RowError(f"{where}: 'turns' must be a non-empty list of objects")
            turns = [_turn(t, image_ref, f"{where} turn {i}") for i, t in enumerate(row["turns"])]
        else:
            turns = [_turn(row, image_ref, where)]
        if turns[-1].reference is None:
            raise RowError(f"{where}: 'answer' is missing")
        match = row.get("match", "exact")
        if match not in ("exact", "contains"):
            raise RowError(f"{where}: 'match' must be 'exact' or 'contains'")
        tools = row.get("tools", [])
        if tools is None:
            tools = []
        if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            raise RowError(f"{where}: 'tools' must be a list of tool names, got {type_name(tools)}")
        metadata = row.get("metadata")
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, dict):
            raise RowError(f"{where}: 'metadata' must be an object, got {type_name(metadata)}")
        return Task(id=tid, turns=turns, tools=list(tools), reference=turns[-1].reference,
                    metadata={"match": match, **metadata})

    def default_settings(self) -> list[Setting]:
        return [Setting(name="default", max_rounds=int(self.options.get("max_rounds", 10)))]

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        graded = [(t, a) for t, a in zip(task.turns, trajectory.answers, strict=False) if t.reference is not None]
        if not graded:
            return Score(value=0.0, details={"per_turn": []})
        contains = task.metadata.get("match") == "contains"
        per_turn = []
        for turn, answer in graded:
            a, r = normalise(answer or ""), normalise(str(turn.reference))
            per_turn.append(1.0 if answer is not None and (r in a if contains else a == r) else 0.0)
        n_ref = sum(1 for t in task.turns if t.reference is not None)
        return Score(value=sum(per_turn) / n_ref, details={"per_turn": per_turn})


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 500 else text[:500] + "…"
