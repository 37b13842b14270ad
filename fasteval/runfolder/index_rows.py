"""Index rows: a record (as written, or read back from its line) as one row of the run index, and
a row back as the values readers use (``JobRow``).

Apart from the index's SQL so the conversion can be read (and fuzzed) on its own: every value a
hostile record can carry (a 2**64 token count, a lone surrogate, an infinite score) is clamped or
turned into text here, and the writer's row and a rebuild's row of the same line agree.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from fasteval.core.pricing import BATCH_TOKENS
from fasteval.core.types import group_of

log = logging.getLogger("fasteval")

_ERROR_CHARS = 300

BATCH_TOKEN_COLUMNS = BATCH_TOKENS
"""The part of each token count a provider's batch API billed (a record's ``usage.batch_*``): the
report prices it at the batch factor, the rest at the full price (fasteval.core.pricing)."""

# Column order of the jobs table (and of the tuples ``row_of_*`` return).
COLUMNS = ("job_id", "model", "suite", "setting", "task_id", "seed", "status", "score", "error_kind", "error",
         "termination", "rounds", "tool_calls", "prompt_tokens", "completion_tokens",
         "cache_read_tokens", "cache_write_tokens", "latency_s", "retries",
         "task_type", *BATCH_TOKEN_COLUMNS, "image_tokens", "fingerprint", "grp", "superseded", "ok",
         "byte_offset", "byte_length")
IndexRowTuple = tuple[Any, ...]
GRP, SUPERSEDED = COLUMNS.index("grp"), COLUMNS.index("superseded")
"""Positions of the group fingerprint and the superseded flag in a row (the index marks the flag)."""


@dataclass(slots=True)
class JobRow:
    """One job's latest record, summarised; ``offset``/``length`` locate its full line."""

    job_id: str
    model: str
    suite: str
    setting: str
    task_id: str
    seed: int
    status: str
    score: float | None
    error_kind: str | None
    error: str | None
    """First 300 characters of the record's error."""
    termination: str | None
    rounds: int
    tool_calls: int
    usage: dict[str, int]
    """prompt_tokens, completion_tokens, cache_read_tokens, cache_write_tokens, their batch_* parts, and
    image_tokens (the part of prompt_tokens the server said were images; 0 where it did not say)."""
    latency_s: float
    retries: int
    task_type: str | None
    offset: int
    length: int
    fingerprint: str | None = None
    """What produced the result (the results store's key); None for a record from before fingerprints."""
    superseded: bool = False
    """Kept aside: its model × suite × setting is in the config with another fingerprint now."""
    grp: str | None = None
    """The group fingerprint (model × suite × setting) its record names."""

    def at(self, offset: int, length: int) -> IndexRowTuple:
        """This row as an index row for the same record at another place (a merged file)."""
        return (self.job_id, self.model, self.suite, self.setting, self.task_id, self.seed, self.status, self.score,
                self.error_kind, self.error, self.termination, self.rounds, self.tool_calls,
                self.usage["prompt_tokens"], self.usage["completion_tokens"], self.usage["cache_read_tokens"],
                self.usage["cache_write_tokens"], self.latency_s, self.retries,
                self.task_type, *(self.usage.get(c, 0) for c in BATCH_TOKEN_COLUMNS), self.usage.get("image_tokens", 0),
                self.fingerprint, self.grp, int(self.superseded), int(self.status == "ok"), offset, length)


def job_row(r: Sequence[Any]) -> JobRow:
    """The ``JobRow`` of a row selected as ``SELECT <COLUMNS>`` (the report's and viewer's values)."""
    return JobRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
                  {"prompt_tokens": r[13], "completion_tokens": r[14], "cache_read_tokens": r[15],
                   "cache_write_tokens": r[16], **dict(zip(BATCH_TOKEN_COLUMNS, r[20:24], strict=True)),
                   "image_tokens": r[24]},
                  r[17], r[18], r[19], r[29], r[30], r[25], bool(r[27]), r[26])


def _short(text: Any) -> str | None:
    if text is None:
        return None
    s = str(text)
    return s if len(s) <= _ERROR_CHARS else s[:_ERROR_CHARS - 1] + "…"


# What an INTEGER column holds; a value past either end (a hostile server's 2**64 tokens) is
# clamped there, the record keeps the value as sent, and a sum that would pass it saturates.
INT_MAX = (1 << 63) - 1
INT_MIN = -(1 << 63)
_SCORE, _LATENCY = 7, 17  # positions of the REAL columns in a row


def _num(v: Any, default: float = 0.0) -> float:
    """A finite number of a JSON value, else ``default`` (a huge int is clamped, not overflowed)."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return default
    if isinstance(v, int):
        return float(min(max(v, -INT_MAX), INT_MAX))
    return v if math.isfinite(v) else default


def _int(v: Any) -> int:
    """An int the index can hold (clamped to 64 bits) of a JSON value, 0 for a non-number."""
    if isinstance(v, float):
        if not math.isfinite(v):
            return 0
        v = int(v)
    elif isinstance(v, str) and len(v) < 400:
        # The record writer keeps an int past 64 bits as its digits; read back, it clamps alike.
        try:
            v = int(v)
        except ValueError:
            return 0
    if isinstance(v, int) and not isinstance(v, bool):
        return min(max(v, INT_MIN), INT_MAX)
    return 0


def storable_text(v: Any) -> str:
    """``str(v)`` that SQLite accepts: no lone surrogates, no int too long to print."""
    try:
        s = v if isinstance(v, str) else str(v)
    except ValueError:  # an int past Python's str-conversion digit limit
        s = f"<integer of {v.bit_length()} bits>" if isinstance(v, int) else "<unprintable value>"
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "replace").decode("utf-8")
    return s


def _sql_value(v: Any, col: int) -> Any:
    """One value of a row made storable (the slow path, for a row SQLite refused)."""
    if v is None:
        return None
    if col in (_SCORE, _LATENCY):
        f = _num(v, math.nan)
        return (f if math.isfinite(f) else None) if col == _SCORE else (f if math.isfinite(f) else 0.0)
    if isinstance(v, int | float) and not isinstance(v, str):
        return _int(v)
    return storable_text(v)


def storable_row(row: IndexRowTuple) -> IndexRowTuple:
    """``row`` with every value clamped or turned into text the index can hold."""
    return tuple(_sql_value(v, i) for i, v in enumerate(row))


def row_of_dict(rec: dict[str, Any], offset: int, length: int) -> IndexRowTuple:
    """The index row of a record dict (as read back from a line)."""
    try:
        usage = rec["usage"]
        task_type = rec["metadata"].get("task_type")
        status = rec["status"]
        error = rec["error"]
        score = rec["score"]
        row = (rec["job_id"], rec["model"], rec["suite"], rec["setting"], rec["task_id"], int(rec["seed"]), status,
               None if score is None else float(score), rec["error_kind"],
               error if error is None or len(error) <= _ERROR_CHARS else _short(error), rec["termination"],
               int(rec["rounds"]), int(rec["tool_calls"]), int(usage.get("prompt_tokens", 0)),
               int(usage.get("completion_tokens", 0)), int(usage.get("cache_read_tokens", 0)),
               int(usage.get("cache_write_tokens", 0)), float(rec["latency_s"]), int(rec["retries"]),
               None if task_type is None else str(task_type), *(int(usage.get(c, 0)) for c in BATCH_TOKEN_COLUMNS),
               int(usage.get("image_tokens", 0)), *identity_columns(rec.get("fingerprint"), rec.get("components")),
               int(status == "ok"), offset, length)
        if _SQL_TYPES.issuperset(map(type, row)):
            return row
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        pass
    return _careful_row(rec, offset, length)


_SQL_TYPES = frozenset({str, int, float, type(None)})


@functools.lru_cache(maxsize=4096)
def _group(model: str, suite: str, setting: str) -> str:
    return group_of(model, suite, setting)


def identity_columns(fingerprint: Any, components: Any) -> tuple[str | None, str | None, int]:
    """The fingerprint, group fingerprint and superseded flag (0: the index marks it) of a record's
    ``fingerprint`` and ``components``; None for a record from before fingerprints."""
    fp = fingerprint if isinstance(fingerprint, str) and fingerprint else None
    grp = None
    if isinstance(components, dict):
        parts = (components.get("model"), components.get("suite"), components.get("setting"))
        if all(isinstance(p, str) for p in parts) and any(parts):
            grp = _group(*parts)
    return fp, grp, 0


def _careful_row(rec: dict[str, Any], offset: int, length: int) -> IndexRowTuple:
    """``row_of_dict`` for a record with missing fields or odd types (hand-written, old)."""
    usage = rec.get("usage") if isinstance(rec.get("usage"), dict) else {}
    meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    score = rec.get("score")
    task_type = meta.get("task_type") if meta else None
    status = storable_text(rec.get("status"))

    def text(key: str) -> str | None:
        v = rec.get(key)
        return None if v is None else storable_text(v)

    usage = usage or {}
    error = rec.get("error")
    return (storable_text(rec["job_id"]), storable_text(rec.get("model")), storable_text(rec.get("suite")),
            storable_text(rec.get("setting")), storable_text(rec.get("task_id")), _int(rec.get("seed")),
            storable_text(status), _score(score),
            text("error_kind"), None if error is None else _short(storable_text(error)), text("termination"),
            _int(rec.get("rounds")), _int(rec.get("tool_calls")), _int(usage.get("prompt_tokens")),
            _int(usage.get("completion_tokens")), _int(usage.get("cache_read_tokens")),
            _int(usage.get("cache_write_tokens")), _num(rec.get("latency_s")),
            _int(rec.get("retries")), None if task_type is None else storable_text(task_type),
            *(_int(usage.get(c)) for c in BATCH_TOKEN_COLUMNS), _int(usage.get("image_tokens")),
            *identity_columns(rec.get("fingerprint"), rec.get("components")), int(status == "ok"), offset, length)


def _score(v: Any) -> float | None:
    f = _num(v, math.nan)
    return f if math.isfinite(f) else None


def row_of_record(rec: Any, offset: int, length: int) -> IndexRowTuple | None:
    """The index row of a ``fasteval.core.types.Record`` being written (no serialise/parse round trip).

    None when a field has an odd type or size (a seed from a dataset, a score past float range,
    a token count past 64 bits): the caller then indexes the written line as a rebuild would.
    """
    try:
        usage = rec.usage or {}
        task_type = (rec.metadata or {}).get("task_type")
        if task_type is not None and not isinstance(task_type, str):
            return None  # a list or a number: index it as written (a 2**64 inside is a string there)
        row: IndexRowTuple = (rec.job_id, rec.model, rec.suite, rec.setting, rec.task_id, int(rec.seed), rec.status,
                      None if rec.score is None else float(rec.score), rec.error_kind, _short(rec.error), rec.termination,
                      int(rec.rounds), int(rec.tool_calls), int(usage.get("prompt_tokens", 0)),
                      int(usage.get("completion_tokens", 0)), int(usage.get("cache_read_tokens", 0)),
                      int(usage.get("cache_write_tokens", 0)), float(rec.latency_s), int(rec.retries),
                      None if task_type is None else str(task_type),
                      *(int(usage.get(c, 0)) for c in BATCH_TOKEN_COLUMNS), int(usage.get("image_tokens", 0)),
                      *identity_columns(rec.fingerprint, rec.components), int(rec.status == "ok"), offset, length)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None
    # Types exactly as a rebuild reads them back (a bool is no int, inf no float of JSON), so the
    # writer's row and the rebuild's agree; the range check is SQLite's own (OverflowError).
    if _SQL_TYPES.issuperset(map(type, row)) and math.isfinite(row[_LATENCY]) and \
            (row[_SCORE] is None or math.isfinite(row[_SCORE])):
        return row
    return None


def row_of_written(rec: Any, line: bytes, offset: int) -> IndexRowTuple | None:
    """The row of a record the writer has just written as ``line`` (None: a bad line)."""
    row = row_of_record(rec, offset, len(line))
    if row is not None:
        return row
    doc = summarise_line(line)
    return None if doc is None else row_or_none(doc, offset, len(line))


def row_or_none(rec: dict[str, Any], offset: int, length: int) -> IndexRowTuple | None:
    """The row of a parsed line, or None (a bad line) when no row can be made of it."""
    try:
        return row_of_dict(rec, offset, length)
    except Exception as e:  # a value no coercion foresaw: the line is skipped, never the index
        log.warning("run index: line at byte %s not indexed (%s)", offset, e)
        return None


def summarise_line(line: bytes) -> dict[str, Any] | None:
    """The record of a line, or None for a line that is not one (exactly as every reader decides).

    The whole line is parsed: a torn record followed by a whole one on the same line (an append
    without repair) starts like a valid record, and only a full parse rejects it. Parsing costs
    only on catch-up and rebuild; the writer indexes what it writes without parsing anything.
    """
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return rec if isinstance(rec, dict) and "job_id" in rec else None

