"""``jsonl``: tasks from a user's own file, scored by exact or contains match.

One JSON object per line: ``id``, ``prompt`` (or ``turns``: [{"text", "images", "answer"}]),
``images`` (paths relative to the file), ``answer``, ``tools``, ``match`` ("exact"|"contains").
A bad line becomes a LoadError naming the line and field; the other lines still run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from fasteval.blobs import BlobStore
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.demo import normalise
from fasteval.types import Task, Trajectory, Turn


class RowError(ValueError):
    pass


def _turn(obj: dict[str, Any], base: Path, blobs_put: Any, where: str) -> Turn:
    text = obj.get("text", obj.get("prompt"))
    if not isinstance(text, str) or not text:
        raise RowError(f"{where}: 'prompt'/'text' must be a non-empty string")
    images = obj.get("images") or []
    if not isinstance(images, list):
        raise RowError(f"{where}: 'images' must be a list of paths")
    refs = []
    for img in images:
        path = base / str(img)
        try:
            refs.append(blobs_put(path))
        except OSError as e:
            raise RowError(f"{where}: image {img!r} cannot be read ({e.strerror})") from None
    return Turn(text=text, images=refs, reference=obj.get("answer"))


@register_suite
class JsonlSuite(Suite):
    name = "jsonl"

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        super().__init__(options, blobs)
        self._image_refs: dict[tuple[str, int, int], str] = {}

    def _put_image(self, path: Path) -> str:
        """Store an image file once per load: datasets often point many rows at the same file."""
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if key not in self._image_refs:
            self._image_refs[key] = self.blobs.put(path.read_bytes())
        return self._image_refs[key]

    def load(self) -> Iterator[Task | LoadError]:
        path = Path(str(self.options.get("path", "")))
        if not path.is_file():
            yield LoadError(task_id=f"{path}", message=f"jsonl suite: file {path} does not exist")
            return
        with path.open("rb") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                tid = f"line-{lineno}"
                try:
                    row = orjson.loads(line)
                    if not isinstance(row, dict):
                        raise RowError(f"line {lineno}: expected a JSON object")
                    tid = str(row.get("id", tid))
                    yield self._task(row, tid, path.parent, lineno)
                except (orjson.JSONDecodeError, RowError) as e:
                    yield LoadError(task_id=tid, message=f"{path.name}: {e}")

    def _task(self, row: dict[str, Any], tid: str, base: Path, lineno: int) -> Task:
        where = f"line {lineno} (id {tid})"
        if "turns" in row:
            if not isinstance(row["turns"], list) or not row["turns"]:
                raise RowError(f"{where}: 'turns' must be a non-empty list")
            turns = [_turn(t, base, self._put_image, f"{where} turn {i}") for i, t in enumerate(row["turns"])]
        else:
            turns = [_turn(row, base, self._put_image, where)]
        if turns[-1].reference is None:
            raise RowError(f"{where}: 'answer' is missing")
        match = row.get("match", "exact")
        if match not in ("exact", "contains"):
            raise RowError(f"{where}: 'match' must be 'exact' or 'contains'")
        tools = row.get("tools", [])
        return Task(id=tid, turns=turns, tools=list(tools), reference=turns[-1].reference,
                    metadata={"match": match, **(row.get("metadata") or {})})

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
