"""A record in the shape the pages and ``show`` read, whatever types its fields have on disk.

``records.jsonl`` is written by us but read from folders that were copied, merged, edited by hand
or handed over by someone else: a ``trajectory`` that is a string, messages that are numbers, a
``usage`` that is a list. The view must render such a record (showing what is there), never fail
on it. :func:`viewable` replaces each container of the wrong type by an empty one of the right
type and drops list items that are not objects; scalars are left as they are (the pages print
them with ``str``). ``/api/job`` still returns the record as written.
"""

from __future__ import annotations

from typing import Any


def _objects(value: Any) -> list[dict[str, Any]]:
    return [dict(x) for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    return [x for x in value if isinstance(x, str)] if isinstance(value, list) else []


def _message(m: dict[str, Any]) -> dict[str, Any]:
    calls = []
    for tc in _objects(m.get("tool_calls")):
        if not isinstance(tc.get("function"), dict):
            tc["function"] = {}
        calls.append(tc)
    m["tool_calls"] = calls
    return m


def _log(t: dict[str, Any]) -> dict[str, Any]:
    t["images"] = _strings(t.get("images"))
    if not isinstance(t.get("extra"), dict):
        t.pop("extra", None)
    return t


def viewable(record: Any) -> dict[str, Any]:
    """A shallow-copied record whose containers have the types the renderers expect."""
    rec: dict[str, Any] = dict(record) if isinstance(record, dict) else {"record": record}
    raw = rec.get("trajectory")
    traj: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    traj["messages"] = [_message(m) for m in _objects(traj.get("messages"))]
    traj["tool_calls"] = [_log(t) for t in _objects(traj.get("tool_calls"))]
    traj["usage_by_turn"] = _objects(traj.get("usage_by_turn"))
    if not isinstance(traj.get("answers"), list):
        traj["answers"] = []
    rec["trajectory"] = traj
    for key in ("score_details", "usage", "metadata"):
        value = rec.get(key)
        if value is not None and not isinstance(value, dict):
            rec[key] = {"(not an object)": value}
    return rec


def seconds(value: Any) -> str:
    """A latency as ``0.123 s``; a field that is not a number is shown as written."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{float(value):.3f} s"
    return "0.000 s" if value is None else f"{value} s"
