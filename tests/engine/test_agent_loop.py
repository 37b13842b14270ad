"""The agent loop end to end through run_sweep against the sim server: protocols, rounds, turns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

from fasteval.config.load import load_config
from fasteval.core.types import Task, Trajectory, Turn
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.agent import parse_text_tool_call
from fasteval.engine.run.sweep import run_sweep
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.demo import render


def write_config(tmp: Path, cfg: dict[str, Any]) -> Path:
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run_dir / "records.jsonl").read_bytes().splitlines()]


def demo_cfg(**model: Any) -> dict[str, Any]:
    return {
        "seeds": [0, 1],
        "models": [{"name": "sim-tools", "provider": "sim", "policy": "tools", **model}],
        "suites": [{"name": "demo", "options": {"n_tasks": 4, "image_size": [320, 240]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"], "max_rounds": 6}]}],
    }


async def test_native_tool_calls_solve_demo_tasks_including_multi_turn(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, demo_cfg()))
    res = await run_sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    assert (res.ok, res.errors) == (8, 0)
    recs = records(tmp_path / "run")
    assert all(r["score"] == 1.0 for r in recs)
    multi = [r for r in recs if r["metadata"]["turns"] == 2]
    assert multi, "the demo suite has a two-turn task"
    traj = multi[0]["trajectory"]
    assert len(traj["answers"]) == 2 and len(traj["usage_by_turn"]) == 2
    by_round = traj["prompt_tokens_by_round"]  # every request's prompt, not only a per-turn sum
    assert len(by_round) == multi[0]["rounds"] and sum(by_round) == multi[0]["usage"]["prompt_tokens"]
    assert by_round == sorted(by_round) and by_round[0] < by_round[-1]  # a growing history
    completions = traj["completion_tokens_by_round"]  # each request's reply, for per-step metrics (ATIF)
    assert len(completions) == len(by_round) and sum(completions) == multi[0]["usage"]["completion_tokens"]
    turns = traj["turn_by_round"]  # which user turn each request belongs to
    assert len(turns) == len(by_round) and turns == sorted(turns) and set(turns) == {0, 1}
    names = [c["name"] for c in traj["tool_calls"]]
    assert names[:2] == ["image_zoom_in_tool", "calculator"] and names[-1] == "calculator"
    zoom = traj["tool_calls"][0]
    assert zoom["status"] == "ok" and len(zoom["images"]) == 1
    assert (tmp_path / "run" / "blobs" / zoom["images"][0][:2] / zoom["images"][0]).exists()
    # images are content hashes in the record, never bytes
    assert b"base64" not in (tmp_path / "run" / "records.jsonl").read_bytes()


async def test_tool_images_go_in_tool_message_when_the_provider_allows(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, demo_cfg(tool_message_images=True)))
    await run_sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    traj = records(tmp_path / "run")[0]["trajectory"]
    tool_msgs = [m for m in traj["messages"] if m["role"] == "tool" and isinstance(m["content"], list)]
    assert tool_msgs and any(p["type"] == "image" for p in tool_msgs[0]["content"])
    assert not any(m["role"] == "user" and "Images returned" in str(m["content"]) for m in traj["messages"])


async def test_more_images_than_the_endpoint_takes_ends_the_job_as_image_limit(tmp_path: Path) -> None:
    """A zoom's crop is a second image; an endpoint taking one per request (vLLM's
    --limit-mm-per-prompt) would refuse the next request, so the job ends there, in its own words."""
    cfg = load_config(write_config(tmp_path, demo_cfg(capabilities={"max_images": 1})))
    res = await run_sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    recs = records(tmp_path / "run")
    assert (res.ok, res.errors) == (8, 0)
    for r in recs:
        assert r["termination"] == "image_limit" and r["status"] == "ok" and r["score"] == 0.0, r
        assert r["rounds"] == 1 and [c["name"] for c in r["trajectory"]["tool_calls"]] == ["image_zoom_in_tool"]
        assert r["trajectory"]["termination_reason"] == (
            "turn 0 round 1: the conversation holds 2 images, more than the 1 the server takes in one prompt "
            "(--limit-mm-per-prompt in serve.args)")
    two = load_config(write_config(tmp_path, demo_cfg(capabilities={"max_images": 2})))
    await run_sweep(two, RunOptions(run_dir=tmp_path / "run2", progress=False))
    assert all(r["score"] == 1.0 for r in records(tmp_path / "run2"))  # within the limit nothing changes


async def test_max_rounds_ends_the_turn(tmp_path: Path) -> None:
    cfg_d = demo_cfg()
    cfg_d["suites"][0]["settings"][0]["max_rounds"] = 1
    cfg = load_config(write_config(tmp_path, cfg_d))
    await run_sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    recs = records(tmp_path / "run")
    assert {r["termination"] for r in recs} == {"max_rounds"}
    assert all(r["rounds"] == len(r["trajectory"]["answers"]) for r in recs)  # one round per turn
    assert all(r["score"] == 0.0 and r["status"] == "ok" for r in recs)


async def test_tool_errors_reach_the_model(tmp_path: Path) -> None:
    data = tmp_path / "tasks.jsonl"
    # no image at all: the zoom tool must fail with a reason, and the model must see it
    data.write_bytes(orjson.dumps({"id": "t1", "prompt": "zoom please", "answer": "x",
                                   "tools": ["image_zoom_in_tool", "calculator"]}) + b"\n")
    cfg = load_config(write_config(tmp_path, {
        "models": [{"name": "sim", "provider": "sim", "policy": "tools", "tool_uses": 2}],
        "suites": [{"name": "jsonl", "options": {"path": str(data)}}]}))
    await run_sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    (rec,) = records(tmp_path / "run")
    calls = rec["trajectory"]["tool_calls"]
    assert [c["name"] for c in calls] == ["calculator", "image_zoom_in_tool"]
    assert [c["status"] for c in calls] == ["ok", "error"]
    tool_msgs = [m for m in rec["trajectory"]["messages"] if m["role"] == "tool"]
    assert tool_msgs[1]["content"] == calls[1]["output"] and calls[1]["error"]
    assert rec["status"] == "ok" and rec["answer"] == calls[1]["output"][:200].strip()


@register_suite
class TextProtocolSuite(Suite):
    """A test suite speaking the <tool_call> text protocol with the tools in the system prompt."""

    name = "test-text-protocol"

    def load(self) -> Iterator[Task | LoadError]:
        import random

        png, box, level = render(random.Random(5), 320, 240)
        ref = self.blobs.put(png)
        text = (f"A uniform grey square lies inside the box [{box[0]}, {box[1]}, {box[2]}, {box[3]}] (0-1000). "
                f"Read its grey level and add 7 to it.")
        yield Task(id="t0", turns=[Turn(text=text, images=[ref], reference=str(level + 7))],
                   tools=["image_zoom_in_tool", "calculator"])
        yield LoadError(task_id="broken-row", message="row 2: field 'image' is not valid base64")

    def default_settings(self) -> list[Setting]:
        return [Setting(name="text", tool_protocol="text", max_rounds=5)]

    def system_prompt(self, task: Task, setting: Setting, tool_specs: list[dict[str, Any]]) -> str | None:
        lines = "\n".join(orjson.dumps(s).decode() for s in tool_specs)
        return f"# Tools\n<tools>\n{lines}\n</tools>\nCall a tool with <tool_call>{{json}}</tool_call>."

    def extract_answer(self, text: str, setting: Setting) -> str:
        return text.replace("<answer>", "").replace("</answer>", "").strip()

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        return Score(value=float(trajectory.answers[-1] == task.turns[-1].reference))


async def test_text_protocol_and_load_errors(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, {
        "models": [{"name": "sim", "provider": "sim", "policy": "tools"}],
        "suites": [{"name": "test-text-protocol"}]}))
    res = await run_sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    assert (res.ok, res.errors) == (1, 1)
    recs = {r["task_id"]: r for r in records(tmp_path / "run")}
    ok = recs["t0"]
    assert ok["score"] == 1.0
    msgs = ok["trajectory"]["messages"]
    assert "<tool_call>" in msgs[2]["content"] and msgs[3]["role"] == "user"
    assert msgs[3]["content"][0]["text"].startswith("<tool_response>")
    assert "tools" not in msgs[0]  # no native tools field: the protocol is text
    bad = recs["broken-row"]
    assert bad["status"] == "error" and bad["error_kind"] == "load_error" and "base64" in bad["error"]


def test_parse_text_tool_call_takes_the_first_valid_span() -> None:
    call = parse_text_tool_call('x <tool_call>{"name": "a", "arguments": {"q": 1}}</tool_call>'
                                '<tool_call>{"name": "b", "arguments": {}}</tool_call>')
    assert call is not None and call.name == "a" and orjson.loads(call.arguments) == {"q": 1}
    assert parse_text_tool_call("<tool_call>{not json}</tool_call>") is None
    assert parse_text_tool_call("no call here") is None
    assert parse_text_tool_call('<tool_call>["a"]</tool_call>') is None


@register_suite
class FirstImageOnlySuite(Suite):
    """Shows the model only the first of two images, as VisualToolBench's reference harness does."""

    name = "test-first-image-only"

    def load(self) -> Iterator[Task | LoadError]:
        import random

        a = self.blobs.put(render(random.Random(1), 200, 150)[0])
        b = self.blobs.put(render(random.Random(2), 200, 150)[0])
        yield Task(id="t", turns=[Turn(text="look", images=[a, b], reference="x")], tools=["image_zoom_in_tool"])

    def default_settings(self) -> list[Setting]:
        return [Setting(name="s", fidelity="fixed", max_rounds=3)]

    def user_message(self, task: Task, turn_index: int, setting: Setting, trajectory: Trajectory) -> dict[str, Any]:
        turn = task.turns[turn_index]
        return {"role": "user", "content": [{"type": "image", "image": turn.images[0]},
                                            {"type": "text", "text": turn.text}]}

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        return Score(value=0.0)


async def test_tools_only_see_the_images_the_model_was_shown(tmp_path: Path) -> None:
    from fasteval.engine.run.agent import AgentEnv, execute_tool
    from fasteval.runfolder.blobs import BlobStore
    from fasteval.tools.base import ToolContext, make_tool
    from providers.base import ToolCallRequest

    cfg = load_config(write_config(tmp_path, {
        "models": [{"name": "sim", "provider": "sim", "policy": "tools", "tool_uses": 1}],
        "suites": [{"name": "test-first-image-only"}]}))
    await run_sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    (rec,) = records(tmp_path / "run")
    shown = [p["image"] for p in rec["trajectory"]["messages"][0]["content"] if p["type"] == "image"]
    assert len(shown) == 1
    # the zoom tool, given the context the loop builds, cannot reach the hidden second image
    blobs = BlobStore(tmp_path / "run" / "blobs")
    tool = make_tool("image_zoom_in_tool", fidelity="fixed")
    ctx = ToolContext(blobs=blobs, task=Task(id="t", turns=[]), images=shown, fidelity="fixed")
    env = AgentEnv(client=None, suite=None, setting=None, tools={tool.name: tool}, blobs=blobs)  # type: ignore[arg-type]
    res, _, _ = await execute_tool(ToolCallRequest("c", tool.name, '{"bbox_2d": [0, 0, 500, 500], "img_idx": 1}'),
                                   env, ctx)
    assert res.status == "error"
