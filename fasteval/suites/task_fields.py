"""One row of a user's task file as a Task: fields found by name, checked, and the scorer's spec.

Fields (each renamed by the suite option ``fields``, e.g. ``{prompt: question, images: [image_1,
image_2]}``): ``id``, ``prompt`` (or ``turns``: [{"text"/"prompt", "images", "answer"}]),
``images`` (one or a list: paths, URLs, base64, the hub's image feature; default column
``images``, else ``image``), ``answer`` (a string, a number, or a list: any of them),
``options`` (a list, lettered A, B, ..., or an object of letter: text), ``scorer`` (a name or an
object; else the legacy ``match``, else the suite's), ``tools`` (names) and ``metadata`` (an
object, or a list of columns to copy). CSV cells hold text: a list or an object is written as
JSON, ``options`` may be ``a | b | c`` and ``tools`` ``a, b`` (elsewhere these are lists). A
problem raises RowError naming the field; the suite turns it into that row's load error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from fasteval.core.types import Task, Turn
from fasteval.suites.row_checks import type_name
from fasteval.suites.scorers.choice import option_letters
from fasteval.suites.scorers.registry import Scorers, ScorerSpec, parse_spec, reference_ok

FIELDS = ("id", "prompt", "turns", "images", "answer", "options", "scorer", "tools", "metadata")
_LIST_FIELDS = ("turns", "images", "options", "tools")
ImageRefs = Callable[[Any, str], list[str]]
"""(an image field's value, the field's name for messages) -> blob refs; ValueError says why not."""


class RowError(ValueError):
    """A field of one row that cannot be used."""


@dataclass(frozen=True, slots=True)
class FieldMap:
    """Which column holds each field (``images`` and ``metadata`` may name several columns)."""

    columns: Mapping[str, str | tuple[str, ...]]

    @classmethod
    def from_option(cls, value: Any) -> FieldMap:
        if value is None:
            return cls({})
        if not isinstance(value, dict):
            raise ValueError(f"option 'fields' maps our field names to your columns, got {type_name(value)}")
        out: dict[str, str | tuple[str, ...]] = {}
        for key, column in value.items():
            if key not in FIELDS:
                raise ValueError(f"option 'fields': unknown field {key!r} (fields: {', '.join(FIELDS)})")
            if isinstance(column, list) and key in ("images", "metadata") and all(isinstance(c, str) for c in column):
                out[key] = tuple(column)
            elif isinstance(column, str) and column:
                out[key] = column
            else:
                raise ValueError(f"option 'fields.{key}' must be a column name"
                                 f"{' or a list of them' if key in ('images', 'metadata') else ''}")
        return cls(out)

    def get(self, row: Mapping[str, Any], field: str, *, text_cells: bool = False) -> Any:
        """The field's value; list and object fields written as JSON text are decoded (and, in a
        CSV, where every cell is text, an answer written as a JSON list)."""
        column = self.columns.get(field)
        if isinstance(column, tuple):
            values = [row.get(c) for c in column]
            return values if field == "metadata" else [v for v in values if v not in (None, "")]
        if column is None and field == "images" and "images" not in row:
            column = "image"
        value = row.get(column or field)
        if field in (*_LIST_FIELDS, "metadata") or (field == "answer" and text_cells):
            return _decoded(value)
        return value

    def label(self, field: str, row: Mapping[str, Any] | None = None) -> str:
        """The column a message names for ``field`` (``image`` when the row's images came from there)."""
        column = self.columns.get(field)
        if column is None:
            return "image" if field == "images" and row is not None and "images" not in row else field
        return column if isinstance(column, str) else "/".join(column)


def _decoded(value: Any) -> Any:
    """A CSV cell holding a JSON list or object, decoded (other values as they are)."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


@dataclass(slots=True)
class RowContext:
    """What building a task needs besides the row."""

    fields: FieldMap
    images: ImageRefs
    scorers: Scorers
    default_scorer: ScorerSpec
    options_in_prompt: bool = True
    text_cells: bool = False
    """The file is a CSV or TSV: every cell is text."""


def build_task(row: Mapping[str, Any], default_id: str, ctx: RowContext) -> Task:
    """The row as a Task (its scorer spec and options in metadata); RowError naming the field otherwise."""
    f = ctx.fields
    raw_id = f.get(row, "id")
    if raw_id is None or raw_id == "":
        tid = default_id
    elif isinstance(raw_id, str | int) and not isinstance(raw_id, bool):
        tid = str(raw_id)
    else:
        raise RowError(f"'{f.label('id')}' must be a string or an integer, got {type_name(raw_id)}")
    options = _options(f.get(row, "options"), f.label("options"), ctx.text_cells)
    spec = _spec(row, ctx)
    turns_value = f.get(row, "turns")
    if turns_value not in (None, "", []):
        if not isinstance(turns_value, list):
            raise RowError(f"'{f.label('turns')}' must be a list of objects, got {type_name(turns_value)}")
        bad = next((i for i, t in enumerate(turns_value) if not isinstance(t, dict)), None)
        if bad is not None:
            raise RowError(f"'{f.label('turns')}': turn {bad} must be an object, got {type_name(turns_value[bad])}")
        turns = [_turn(t.get("text", t.get("prompt")), t.get("images"), t.get("answer"), ctx, f"turns[{i}]", "images")
                 for i, t in enumerate(turns_value)]
    else:
        turns = [_turn(f.get(row, "prompt"), f.get(row, "images"), f.get(row, "answer", text_cells=ctx.text_cells),
                       ctx, "", f.label("images", row))]
    if turns[-1].reference is None and spec.name != "judge":
        raise RowError(f"'{f.label('answer')}' is missing")
    if any(isinstance(t.reference, list) for t in turns):
        spec = wrap_list_answers(spec)
    if options and ctx.options_in_prompt:
        block = "\n".join(f"{k}. {v}" for k, v in options.items())
        turns = [Turn(text=f"{t.text}\n\n{block}" if i == 0 else t.text, images=t.images, reference=t.reference)
                 for i, t in enumerate(turns)]
    scorer = ctx.scorers.get(spec)
    for i, turn in enumerate(turns):
        if turn.reference is not None or spec.name == "judge":
            try:
                scorer.check_task(turn.reference, options)
            except ValueError as e:
                raise RowError(f"{'turn ' + str(i) + ': ' if len(turns) > 1 else ''}{e}") from None
    metadata = {**_metadata(f.get(row, "metadata"), f), "scorer": {"name": spec.name, **spec.options}}
    if options:
        metadata["options"] = options
    return Task(id=tid, turns=turns, tools=_tools(f.get(row, "tools"), f.label("tools"), ctx.text_cells),
                reference=turns[-1].reference, metadata=metadata)


def _turn(text: Any, images: Any, answer: Any, ctx: RowContext, where: str, images_label: str) -> Turn:
    prefix = f"{where}." if where else ""
    if not isinstance(text, str) or not text.strip():
        raise RowError(f"'{prefix}{ctx.fields.label('prompt') if not where else 'text'}' must be a non-empty string")
    if answer == "":
        answer = None
    if answer is not None and not reference_ok(answer):
        raise RowError(f"'{prefix}answer' must be a string, a number or a list of them, got {type_name(answer)}")
    try:
        refs = ctx.images(images, f"{prefix}{images_label}")
    except ValueError as e:
        raise RowError(str(e)) from None
    return Turn(text=text, images=refs, reference=answer)


def _spec(row: Mapping[str, Any], ctx: RowContext) -> ScorerSpec:
    value = ctx.fields.get(row, "scorer")
    if value in (None, ""):
        value = row.get("match") or None  # the field jsonl tasks used before scorers had names
    if value is None:
        spec = ctx.default_scorer
    else:
        try:
            spec = parse_spec(value)
        except ValueError as e:
            raise RowError(f"'{ctx.fields.label('scorer')}': {e}") from None
    return spec


def wrap_list_answers(spec: ScorerSpec) -> ScorerSpec:
    """A list of answers under a plain scorer means any of them (``any_of`` with that scorer)."""
    if spec.name not in ("any_of", "judge"):
        return parse_spec({"name": "any_of", "of": {"name": spec.name, **spec.options}})
    return spec


def _options(value: Any, label: str, text_cells: bool) -> dict[str, str]:
    if value in (None, "", []):
        return {}
    if isinstance(value, str) and text_cells:
        value = [v.strip() for v in value.split("|")]
    try:
        return option_letters(value)
    except ValueError as e:
        raise RowError(str(e).replace("'options'", f"'{label}'")) from None


def _tools(value: Any, label: str, text_cells: bool) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str) and text_cells:  # a CSV cell "calculator, image_zoom_in_tool"
        value = [v.strip() for v in value.replace(",", " ").split() if v.strip()]
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise RowError(f"'{label}' must be a list of tool names, got {type_name(value)}")
    return list(value)


def _metadata(value: Any, f: FieldMap) -> dict[str, Any]:
    column = f.columns.get("metadata")
    if isinstance(column, tuple):
        return {c: _json_safe(v) for c, v in zip(column, value, strict=True)}
    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        raise RowError(f"'{f.label('metadata')}' must be an object, got {type_name(value)}")
    return {str(k): _json_safe(v) for k, v in value.items()}


def _json_safe(value: Any) -> Any:
    """Metadata goes into records: bytes (an image column copied by mistake) become a size note."""
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)
