"""``fasteval export --format inspect``: one inspect-ai eval log per model × suite × setting.

We write inspect's ``.eval`` format (a zip) ourselves, with the standard library, rather than its
``.json`` format or its own writer: a ``.eval`` log holds each sample as its own zip member, so a
group of 100,000 jobs is written one sample at a time (the ``.json`` format is one JSON document
that must be built or streamed whole, and inspect's public ``write_eval_log`` takes a finished
``EvalLog`` with every sample in memory). Exporting therefore needs no inspect-ai; reading the
logs (``read_eval_log``, ``inspect view``) does, and the tests read every log with it.

The members, as inspect's own recorder lays them out: ``_journal/start.json`` (the spec),
``samples/<task>_epoch_<n>.json`` (a seed is an epoch: the group's seeds in order are epochs
1..n), ``summaries.json`` (streamed from a temporary file, never held), ``reductions.json``
(each task's mean over seeds per scorer) and ``header.json`` (the spec, results and stats).
"""

from __future__ import annotations

import base64
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from fasteval.core.headline import headline, over_seeds
from fasteval.core.version import fasteval_version
from fasteval.runfolder.index import RunIndex
from fasteval.view.export.common import (
    Group,
    RunInfo,
    Selection,
    content_parts,
    file_part,
    groups,
    jsonable_metadata,
    media_type,
    read_image,
    records,
    scores_of,
    text_of,
    usage_of,
)

LOG_VERSION = 2
"""inspect's log schema version (``EvalLog.version``) these logs follow."""
_SUMMARY_INPUT_CHARS = 1000


def _seed(rec: dict[str, Any]) -> int:
    """The record's seed (0 for a hand-edited record whose seed is not a number)."""
    seed = rec.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _iso(value: Any) -> str:
    return str(value) if isinstance(value, str) and value else datetime.now(UTC).isoformat()


@dataclass(slots=True)
class _Attachments:
    """A sample's images as inspect attachments (``attachment://<sha256>`` -> a data URI)."""

    info: RunInfo
    with_images: bool
    found: dict[str, str] = field(default_factory=dict)

    def part(self, ref: str) -> dict[str, Any]:
        if self.with_images:
            if ref not in self.found:
                data = read_image(self.info.run_dir, ref)
                mime = media_type(data[:16]) if data is not None else None
                if data is not None and mime is not None:
                    self.found[ref] = f"data:{mime};base64,{base64.b64encode(data).decode()}"
            if ref in self.found:
                return {"type": "image", "image": f"attachment://{ref}"}
        return {"type": "text", "text": f"[image {ref[:64]}]"}


def _content(content: Any, att: _Attachments) -> str | list[dict[str, Any]]:
    parts = content_parts(content)
    if all(kind == "text" for kind, _ in parts):
        return "".join(t for _, t in parts)
    return [{"type": "text", "text": v} if kind == "text" else att.part(v) for kind, v in parts]


def _tool_call(tc: dict[str, Any], i: int) -> dict[str, Any]:
    """An OpenAI-format call as inspect's ``ToolCall`` (arguments parsed; text that is not JSON kept, flagged)."""
    fn: dict[str, Any] = tc["function"]  # ``viewable`` made it an object
    raw = fn.get("arguments")
    call: dict[str, Any] = {"id": str(tc.get("id") or f"call_{i}"), "function": str(fn.get("name") or ""),
                            "arguments": {}, "type": "function"}
    if isinstance(raw, dict):
        call["arguments"] = raw
    elif isinstance(raw, str) and raw.strip():
        try:
            parsed = orjson.loads(raw)
            call["arguments"] = parsed if isinstance(parsed, dict) else {"value": parsed}
        except orjson.JSONDecodeError:
            call["parse_error"] = "the arguments are not JSON"
            call["arguments"] = {"raw": raw}
    return call


def _messages(rec: dict[str, Any], att: _Attachments) -> list[dict[str, Any]]:
    """The conversation in inspect's message types; tool results named and failed as the log says."""
    traj = rec["trajectory"]
    log = {str(c.get("id")): c for c in traj["tool_calls"]}
    out: list[dict[str, Any]] = []
    for msg in traj["messages"]:
        role = msg.get("role")
        content = _content(msg.get("content"), att)
        if role == "assistant":
            m: dict[str, Any] = {"role": "assistant", "content": content, "source": "generate",
                                 "model": str(rec.get("model"))}
            calls = [_tool_call(tc, i) for i, tc in enumerate(msg.get("tool_calls") or [])]
            if calls:
                m["tool_calls"] = calls
            out.append(m)
        elif role == "tool":
            call_id = str(msg.get("tool_call_id"))
            logged = log.get(call_id) or {}
            m = {"role": "tool", "content": content, "tool_call_id": call_id, "function": logged.get("name")}
            if logged.get("status") == "error":
                m["error"] = {"type": "unknown", "message": str(logged.get("error") or "the tool failed")}
            out.append(m)
        elif role == "system":
            out.append({"role": "system", "content": content})
        else:
            out.append({"role": "user", "content": content})
    return out


def _sample(info: RunInfo, rec: dict[str, Any], epoch: int, att: _Attachments) -> dict[str, Any]:
    messages = _messages(rec, att)
    first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), None)
    inputs = messages[:first_user + 1] if first_user is not None else (messages[:1] or "")
    model = str(rec.get("model"))
    usage = usage_of(rec)
    gold = (rec.get("score_details") or {}).get("gold")
    final = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    sample: dict[str, Any] = {
        "id": str(rec.get("task_id")), "epoch": epoch, "input": inputs, "target": gold if isinstance(gold, str) else "",
        "messages": messages,
        "output": {"model": model, "completion": rec.get("answer") or "",
                   "choices": [{"message": final, "stop_reason": "max_tokens" if rec.get("termination") == "max_tokens"
                                else "stop"}] if final else []},
        "scores": {name: {"value": v, "answer": rec.get("answer"),
                          "metadata": {"score_details": rec.get("score_details")} if name == "fasteval" else {}}
                   for name, v in scores_of(rec).items()},
        "metadata": _metadata(info, rec),
        "model_usage": {model: _usage(usage, info.cost(model, usage))},
        "total_time": rec.get("latency_s"), "working_time": rec.get("latency_s"), "uuid": str(rec.get("job_id")),
        "attachments": att.found,
    }
    if rec.get("status") != "ok":
        sample["error"] = {"message": str(rec.get("error") or rec.get("error_kind") or "error"), "traceback": "",
                           "traceback_ansi": ""}
    return sample


def _metadata(info: RunInfo, rec: dict[str, Any]) -> dict[str, Any]:
    ids = {k: rec.get(k) for k in ("job_id", "model", "suite", "setting", "task_id", "seed", "status", "error_kind",
                                   "termination", "rounds", "tool_calls", "retries")}
    return {**jsonable_metadata(rec.get("metadata")), **ids, "run": info.run_dir.name, "config_hash": info.config_hash}


def _usage(usage: dict[str, int], cost: float | None) -> dict[str, Any]:
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    out: dict[str, Any] = {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion,
                           "input_tokens_cache_read": usage.get("cache_read_tokens", 0),
                           "input_tokens_cache_write": usage.get("cache_write_tokens", 0),
                           "reasoning_tokens": usage.get("reasoning_tokens", 0)}
    if cost is not None:
        out["total_cost"] = cost
    return out


def _summary(sample: dict[str, Any]) -> dict[str, Any]:
    """What inspect lists per sample without opening it (its ``EvalSampleSummary``)."""
    first = sample["input"][-1]["content"] if isinstance(sample["input"], list) and sample["input"] else ""
    meta = sample["metadata"]
    return {"id": sample["id"], "epoch": sample["epoch"], "input": text_of(first)[:_SUMMARY_INPUT_CHARS],
            "target": sample["target"], "uuid": sample["uuid"],
            "metadata": {k: meta.get(k) for k in ("job_id", "seed", "status", "termination")},
            "scores": {k: {"value": v["value"], "answer": v["answer"]} for k, v in sample["scores"].items()},
            "model_usage": sample["model_usage"], "total_time": sample["total_time"],
            "working_time": sample["working_time"], "error": (sample.get("error") or {}).get("message"),
            "retries": sample["metadata"].get("retries"), "completed": True, "message_count": len(sample["messages"])}


@dataclass(slots=True)
class _Tally:
    """What the header and reductions need, folded one sample at a time (sums, never the samples)."""

    by_seed: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    """scorer -> seed -> [sum, n]."""
    by_task: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """scorer -> task -> [sum, n]."""
    usage: dict[str, int] = field(default_factory=dict)
    cost: float | None = None

    def add(self, rec: dict[str, Any], sample: dict[str, Any], model: str) -> None:
        for name, value in scores_of(rec).items():
            seed = _seed(rec)
            s = self.by_seed.setdefault(name, {}).setdefault(seed, [0.0, 0])
            s[0] += value
            s[1] += 1
            t = self.by_task.setdefault(name, {}).setdefault(sample["id"], [0.0, 0])
            t[0] += value
            t[1] += 1
        for k, v in sample["model_usage"][model].items():
            if k == "total_cost":
                self.cost = (self.cost or 0.0) + float(v)
            else:
                self.usage[k] = self.usage.get(k, 0) + int(v)


def _results(index: RunIndex, group: Group, tally: _Tally, n_jobs: int) -> dict[str, Any]:
    model, suite, setting = group
    head = headline(index.select(("status", "score", "seed"), model=model, suite=suite, setting=setting))
    scores = []
    for name in sorted(tally.by_seed, key=lambda n: (n != "fasteval", n)):
        if name == "fasteval":  # the report's headline, from the index exactly as the report reads it
            mean, std = head.mean, head.std
        else:
            _, mean, std = over_seeds({seed: [s / n] for seed, (s, n) in tally.by_seed[name].items()})
        metrics = {k: {"name": k, "value": v} for k, v in (("mean", mean), ("std", std)) if v is not None}
        scores.append({"name": name, "scorer": name, "reducer": "mean", "metrics": metrics,
                       "scored_samples": sum(int(n) for _, n in tally.by_seed[name].values())})
    return {"total_samples": n_jobs, "completed_samples": head.n_ok, "scores": scores,
            "metadata": {"n_ok": head.n_ok, "n_error": head.n_error, "n_seeds": head.n_seeds,
                         "seed_means": list(head.seed_means)}}


def _spec(info: RunInfo, group: Group, seeds: list[int], n_tasks: int) -> dict[str, Any]:
    model, suite, setting = group
    run_id = f"{info.run_dir.name}-{info.config_hash or 'unknown'}"
    return {
        "eval_id": file_part(f"{run_id}-{model}-{suite}-{setting}", 120), "run_id": run_id,
        "created": _iso(info.manifest.get("created")), "task": suite, "task_id": f"{suite}/{setting}",
        "task_display_name": f"{suite} ({setting})", "task_args": {"setting": setting},
        "dataset": {"name": suite, "samples": n_tasks}, "model": model,
        "config": {"epochs": len(seeds)}, "packages": {"fasteval": fasteval_version()},
        "metadata": {**info.provenance(), "setting": setting, "seeds": seeds,
                     "epochs": "epoch n is the n-th of the group's seeds, in order"},
    }


def _stream_summaries(zf: zipfile.ZipFile, lines: IO[bytes]) -> None:
    lines.seek(0)
    with zf.open("summaries.json", "w", force_zip64=True) as out:
        out.write(b"[")
        for i, line in enumerate(lines):
            out.write((b"," if i else b"") + line.rstrip(b"\n"))
        out.write(b"]")


def write_log(index: RunIndex, info: RunInfo, group: Group, path: Path, *, with_images: bool = True) -> int:
    """One group's eval log at ``path``; the number of samples written."""
    model, suite, setting = group
    where = {"model": model, "suite": suite, "setting": setting}
    seeds = sorted(k[0] for k in index.counts(by=("seed",), **where) if isinstance(k[0], int))
    epoch = {seed: i + 1 for i, seed in enumerate(seeds)}
    tally = _Tally()
    tasks: set[str] = set()
    n = 0
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=5) as zf, tempfile.TemporaryFile() as summaries:
        for rec in records(index, **where):
            sample = _sample(info, rec, epoch.get(_seed(rec), 1), _Attachments(info, with_images))
            name = f"samples/{sample['id']}_epoch_{sample['epoch']}.json"
            if name in zf.NameToInfo:  # a hand-edited record repeating a task and seed: kept apart, by its job id
                sample["id"] = f"{sample['id']} ({sample['uuid']})"
                name = f"samples/{sample['id']}_epoch_{sample['epoch']}.json"
            zf.writestr(name, orjson.dumps(sample, default=str))
            summaries.write(orjson.dumps(_summary(sample), default=str) + b"\n")
            tally.add(rec, sample, model)
            tasks.add(sample["id"])
            n += 1
        spec = _spec(info, group, seeds, len(tasks))
        plan = {"name": "fasteval", "steps": [{"solver": "fasteval agent loop", "params": {"setting": setting}}]}
        zf.writestr("_journal/start.json", orjson.dumps({"version": LOG_VERSION, "eval": spec, "plan": plan}))
        _stream_summaries(zf, summaries)
        zf.writestr("reductions.json", orjson.dumps([
            {"scorer": name, "reducer": "mean",
             "samples": [{"value": s / c, "sample_id": task} for task, (s, c) in sorted(per_task.items())]}
            for name, per_task in sorted(tally.by_task.items())]))
        stats: dict[str, Any] = {"started_at": _iso(info.manifest.get("created")),
                                 "completed_at": _iso(info.manifest.get("updated")),
                                 "model_usage": {model: {**tally.usage, **({"total_cost": tally.cost}
                                                                           if tally.cost is not None else {})}}}
        header = {"version": LOG_VERSION, "status": "cancelled" if info.partial else "success", "eval": spec,
                  "plan": plan, "results": _results(index, group, tally, n), "stats": stats}
        zf.writestr("header.json", orjson.dumps(header, default=str))
    return n


def log_name(group: Group, info: RunInfo) -> str:
    """inspect's file naming (``<created>_<task>_<id>.eval``), made of safe path parts."""
    created = _iso(info.manifest.get("created"))[:19].replace(":", "-")
    model, suite, setting = group
    return f"{created}_{file_part(suite)}-{file_part(setting)}_{file_part(model)}.eval"


def export_inspect(index: RunIndex, info: RunInfo, selection: Selection, dest: Path, *,
                   with_images: bool = True) -> dict[str, Any]:
    """One ``.eval`` log per selected group into the folder ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    written: dict[str, int] = {}
    for group in groups(index, selection):
        name = log_name(group, info)
        if name in written:  # two names that differ only in characters a file name cannot hold
            name = f"{name[:-5]}-{len(written)}.eval"
        written[name] = write_log(index, info, group, dest / name, with_images=with_images)
    return {"logs": len(written), "samples": sum(written.values())}
