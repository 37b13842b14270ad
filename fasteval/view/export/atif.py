"""``fasteval export --format atif``: one ATIF trajectory per job (Harbor's Agent Trajectory
Interchange Format, ATIF-v1.8 as Harbor 0.25's ``harbor.models.trajectories`` defines it).

Messages become steps: system and user messages are ``system`` and ``user`` steps, each model
reply an ``agent`` step carrying its tool calls and, as its observation, what the tools returned
(text and images). An agent step's metrics are that request's prompt and completion tokens; the
trajectory's final metrics are the job's totals and cost; our ids, the score and the suite's
scorers sit in ``extra``. Images are copied once into ``images/`` beside the trajectories and
referenced by a path relative to them. Each file is written whole and alone, one job at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.version import fasteval_version
from fasteval.runfolder.index import RunIndex
from fasteval.view.export.common import (
    EXTENSIONS,
    RunInfo,
    Selection,
    content_parts,
    file_part,
    image_tokens,
    jsonable_metadata,
    media_type,
    read_image,
    records,
    scores_of,
    usage_of,
)

SCHEMA_VERSION = "ATIF-v1.8"
IMAGES = "images"
LISTING = "index.jsonl"
"""One line per exported trajectory: its ids, score and file (for a consumer that filters first)."""


@dataclass(slots=True)
class Images:
    """Blobs copied into the export once each."""

    run_dir: Path
    dest: Path
    known: dict[str, str | None] = field(default_factory=dict)
    """Blob -> its path relative to the trajectories (None: missing, refused or a format ATIF cannot name)."""

    def path(self, ref: str) -> str | None:
        if ref in self.known:
            return self.known[ref]
        data = read_image(self.run_dir, ref)
        mime = media_type(data[:16]) if data is not None else None
        rel = None
        if data is not None and mime is not None:
            rel = f"{IMAGES}/{ref}.{EXTENSIONS[mime]}"
            target = self.dest / rel
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(data)  # the bytes read through O_NOFOLLOW: never a link out of the run folder
        self.known[ref] = rel
        return rel

    def part(self, ref: str) -> dict[str, Any]:
        rel = self.path(ref)
        if rel is None:  # ATIF's image sources are png, jpeg, gif or webp files
            return {"type": "text", "text": f"[image {ref[:64]} not exported: missing or not png/jpeg/gif/webp]"}
        mime = {v: k for k, v in EXTENSIONS.items()}[rel.rsplit(".", 1)[1]]
        return {"type": "image", "source": {"media_type": mime, "path": rel}}


def _message(content: Any, images: Images | None) -> str | list[dict[str, Any]]:
    """A message's content as ATIF wants it: a string when it is text only, else content parts."""
    parts = content_parts(content)
    if all(kind == "text" for kind, _ in parts):
        return "".join(text for _, text in parts)
    out: list[dict[str, Any]] = []
    for kind, value in parts:
        if kind == "text":
            out.append({"type": "text", "text": value})
        elif images is not None:
            out.append(images.part(value))
        else:
            out.append({"type": "text", "text": f"[image {value[:64]}]"})
    return out


def _arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments as an object (ATIF's ``arguments``): JSON text parsed, anything else wrapped."""
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {"_unparsed": raw}
    return raw if isinstance(raw, dict) else {"_value": raw}


@dataclass(slots=True)
class _Steps:
    """Steps built in message order; the open agent step collects the tool results that follow it."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    agent: dict[str, Any] | None = None

    def add(self, step: dict[str, Any]) -> None:
        step["step_id"] = len(self.steps) + 1
        self.steps.append(step)
        self.agent = step if step["source"] == "agent" else None

    def observe(self, call_id: str | None, content: str | list[dict[str, Any]]) -> bool:
        """Attach a tool result to the open agent step; False when it made no call (then it is no result)."""
        if self.agent is None or not self.agent.get("tool_calls"):
            return False
        ids = [c["tool_call_id"] for c in self.agent["tool_calls"]]
        result: dict[str, Any] = {"content": content}
        if call_id in ids:
            result["source_call_id"] = call_id
        elif call_id is None and len(ids) == 1:  # a text protocol's reply to the round's one call
            result["source_call_id"] = ids[0]
        self.agent.setdefault("observation", {"results": []})["results"].append(result)
        return True


@dataclass(slots=True)
class _Rounds:
    """Which model request each assistant message is, from the trajectory's per-request lists.

    Each request appends one assistant message, so the last ``len(prompt_tokens_by_round)``
    assistant messages are the requests in order; earlier ones were put there by the suite (a
    harness's worked examples: copied context). A suite that replaced the history between turns
    keeps fewer: then no message is matched to a request (steps get no metrics, the totals stay).
    """

    prompts: list[int]
    completions: list[int]
    turns: list[int]
    copied: int
    matched: bool
    note: str | None = None

    @classmethod
    def of(cls, traj: dict[str, Any], n_agent: int) -> _Rounds:
        prompts = [int(v) for v in traj.get("prompt_tokens_by_round") or [] if _count(v)]
        completions = [int(v) for v in traj.get("completion_tokens_by_round") or [] if _count(v)]
        turns = [int(v) for v in traj.get("turn_by_round") or [] if _count(v)]
        if n_agent < len(prompts):
            return cls(prompts, completions, turns, 0, False, "the suite replaced the conversation between turns: "
                       "per-step token metrics are omitted; final_metrics hold the job's totals")
        copied = n_agent - len(prompts)
        note = f"the first {copied} agent steps are the suite's context, not requests of this job" if copied else None
        return cls(prompts, completions, turns, copied, True, note)

    def request(self, nth_agent: int) -> int | None:
        """The request index of the ``nth_agent`` assistant message (None: copied context or unmatched)."""
        k = nth_agent - self.copied
        return k if self.matched and k >= 0 else None

    def metrics(self, k: int) -> dict[str, int]:
        m = {"prompt_tokens": self.prompts[k]}
        if k < len(self.completions):
            m["completion_tokens"] = self.completions[k]
        return m

    def turn_key(self, k: int) -> tuple[int, int] | None:
        """(turn, round within the turn) of request ``k``, as the tool-call log numbers them."""
        if k >= len(self.turns):
            return None
        turn = self.turns[k]
        return turn, sum(1 for t in self.turns[:k + 1] if t == turn)

    def opens_turn(self, k: int) -> bool:
        return k < len(self.turns) and (k == 0 or self.turns[k] != self.turns[k - 1])


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _openings(messages: list[dict[str, Any]], rounds: _Rounds) -> set[int]:
    """Indices of the user messages that open a user turn (the others after a call are tool feedback)."""
    out: set[int] = set()
    nth, last_agent = 0, -1
    for j, msg in enumerate(messages):
        if msg.get("role") != "assistant":
            continue
        k = rounds.request(nth)
        if k is not None and rounds.opens_turn(k):
            users = [i for i in range(last_agent + 1, j) if messages[i].get("role") == "user"]
            if users:
                out.add(users[-1])
        nth, last_agent = nth + 1, j
    return out


def _calls(msg: dict[str, Any], logged: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """An agent step's tool calls: the round's logged calls (every protocol, text ones too), else the
    message's native ``tool_calls``."""
    if logged is not None:
        return [{"tool_call_id": str(c.get("id") or f"call_{i}"), "function_name": str(c.get("name") or ""),
                 "arguments": _arguments(c.get("args")),
                 "extra": {k: c.get(k) for k in ("status", "error", "latency_s") if c.get(k) is not None}}
                for i, c in enumerate(logged)]
    out = []
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc.get("function") or {}
        out.append({"tool_call_id": str(tc.get("id") or f"call_{i}"), "function_name": str(fn.get("name") or ""),
                    "arguments": _arguments(fn.get("arguments"))})
    return out


def _agent_step(msg: dict[str, Any], content: str | list[dict[str, Any]], rounds: _Rounds, nth: int,
                log: dict[tuple[int, int], list[dict[str, Any]]]) -> dict[str, Any]:
    k = rounds.request(nth)
    key = rounds.turn_key(k) if k is not None else None
    step: dict[str, Any] = {"source": "agent", "message": content}
    calls = _calls(msg, log.get(key, []) if key is not None else None)
    if calls:
        step["tool_calls"] = calls
    if k is not None:
        step["metrics"] = rounds.metrics(k)
        step["llm_call_count"] = 1
    elif rounds.matched:
        step["is_copied_context"] = True
    return step


def _steps(traj: dict[str, Any], images: Images | None) -> tuple[list[dict[str, Any]], str | None]:
    """The steps of a trajectory, and a note on what its per-step metrics could not say."""
    messages = traj["messages"]
    rounds = _Rounds.of(traj, sum(1 for m in messages if m.get("role") == "assistant"))
    openings = _openings(messages, rounds) if rounds.turns else set()
    log: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for c in traj["tool_calls"]:
        turn, round_ = c.get("turn"), c.get("round")
        log.setdefault((turn if _count(turn) else 0, round_ if _count(round_) else 0), []).append(c)
    steps = _Steps()
    nth = 0
    for j, msg in enumerate(messages):
        role = msg.get("role")
        content = _message(msg.get("content"), images)
        if role == "assistant":
            steps.add(_agent_step(msg, content, rounds, nth, log))
            nth += 1
        elif role == "tool" and steps.observe(str(msg.get("tool_call_id")), content):
            continue
        elif role == "user" and j not in openings and steps.observe(None, content):
            continue
        else:
            steps.add({"source": "system" if role == "system" else "user", "message": content})
    return steps.steps, rounds.note


def trajectory(info: RunInfo, rec: dict[str, Any], images: Images | None) -> dict[str, Any]:
    """One record as an ATIF trajectory (a JSON object valid against ATIF-v1.8)."""
    steps, note = _steps(rec["trajectory"], images)
    if not steps:  # a job that failed before its first message (a bad dataset row): ATIF needs a step
        steps = [{"step_id": 1, "source": "system",
                  "message": f"no conversation: {rec.get('error') or 'the job ended before its first message'}"}]
    usage = usage_of(rec)
    model = str(rec.get("model"))
    job_id = str(rec.get("job_id"))
    final: dict[str, Any] = {
        "total_prompt_tokens": usage.get("prompt_tokens", 0), "total_completion_tokens": usage.get("completion_tokens", 0),
        "total_cached_tokens": usage.get("cache_read_tokens", 0), "total_steps": len(steps),
        "extra": {"rounds": rec.get("rounds"), "tool_calls": rec.get("tool_calls"), "latency_s": rec.get("latency_s"),
                  "retries": rec.get("retries"), "image_tokens": image_tokens(rec),
                  "reasoning_tokens": usage.get("reasoning_tokens", 0)}}
    cost = info.cost(model, usage)
    if cost is not None:
        final["total_cost_usd"] = cost
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "session_id": job_id, "trajectory_id": job_id,
        "agent": {"name": "fasteval", "version": fasteval_version(), "model_name": model,
                  "extra": {"suite": rec.get("suite"), "setting": rec.get("setting")}},
        "steps": steps, "final_metrics": final,
        "extra": {**{k: rec.get(k) for k in ("job_id", "model", "suite", "setting", "task_id", "seed")},
                  **info.provenance(), "status": rec.get("status"), "score": rec.get("score"),
                  "scores": scores_of(rec), "answer": rec.get("answer"), "error": rec.get("error"),
                  "error_kind": rec.get("error_kind"), "termination": rec.get("termination"),
                  "metadata": jsonable_metadata(rec.get("metadata"))},
    }
    if note:
        out["notes"] = note
    return out


def export_atif(index: RunIndex, info: RunInfo, selection: Selection, dest: Path, *,
                with_images: bool = True) -> dict[str, Any]:
    """Write ``<job_id>.json`` per selected job into ``dest`` and the listing ``index.jsonl``."""
    dest.mkdir(parents=True, exist_ok=True)
    images = Images(info.run_dir, dest) if with_images else None
    n = 0
    with (dest / LISTING).open("wb") as listing:
        for rec in records(index, **selection.filters()):
            name = f"{file_part(str(rec.get('job_id')))}.json"
            data = orjson.dumps(trajectory(info, rec, images), option=orjson.OPT_NON_STR_KEYS, default=str)
            (dest / name).write_bytes(data)
            listing.write(orjson.dumps({k: rec.get(k) for k in ("job_id", "model", "suite", "setting", "task_id", "seed",
                                                                "status", "score")} | {"file": name}) + b"\n")
            n += 1
    (dest / "README.txt").write_text(
        f"{n} ATIF trajectories ({SCHEMA_VERSION}) exported by fasteval {fasteval_version()} from "
        f"{info.run_dir.name}; {LISTING} lists them; image paths are relative to this folder.\n")
    return {"trajectories": n, "images": sum(1 for v in (images.known.values() if images else ()) if v)}
