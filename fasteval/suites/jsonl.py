"""``jsonl``: tasks from a user's own file, scored by exact or contains match.

One JSON object per line: ``id``, ``prompt`` (or ``turns``: [{"text", "images", "answer"}]),
``images`` (paths relative to the file, inside its folder unless ``allow_image_root`` says
otherwise), ``answer``, ``tools`` (a list of names), ``metadata`` (an object), ``match``
("exact"|"contains"). A bad line becomes a LoadError naming the line and field; the other
lines still run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from fasteval.options import Opt
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.demo import normalise
from fasteval.suites.row_checks import PathOutsideRoot, confine, image_roots, is_scalar_answer, type_name
from fasteval.types import Task, Trajectory, Turn


class RowError(ValueError):
    pass


def _turn(obj: Any, roots: tuple[Path, ...], base: Path, blobs_put: Any, where: str) -> Turn:
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
            data = confine(base / img, roots).read_bytes()
        except PathOutsideRoot as e:
            raise RowError(f"{where}: 'images[{i}]': {e}") from None
        except OSError as e:
            raise RowError(f"{where}: 'images[{i}]' {img[:200]!r} cannot be read ({e.strerror})") from None
        refs.append(blobs_put(data))  # a failure here is the run folder's disk, not the row's
    answer = obj.get("answer")
    if answer is not None and not is_scalar_answer(answer):
        raise RowError(f"{where}: 'answer' must be a string or a number, got {type_name(answer)}")
    return Turn(text=text, images=refs, reference=answer)


@register_suite
class JsonlSuite(Suite):
    name = "jsonl"
    options_schema = {"path": Opt("path", "the .jsonl file: one task per line", required=True, exists=True),
                      "max_rounds": Opt("int", "rounds of the default setting")}
    setting_options = {}

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
        if "turns" in row:
            if not isinstance(row["turns"], list) or not row["turns"]:
                raise RowError(f"{where}: 'turns' must be a non-empty list of objects")
            turns = [_turn(t, roots, base, self.blobs.put, f"{where} turn {i}") for i, t in enumerate(row["turns"])]
        else:
            turns = [_turn(row, roots, base, self.blobs.put, where)]
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
