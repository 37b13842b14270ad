"""The rubric judge: reply parsing, and the call flow against a real loopback OpenAI-style server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from vtb_fixtures import MULTI_ID, SINGLE_ID, sample_rows, write_parquet

from fasteval.core.types import Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import ScoreContext
from fasteval.suites.visualtoolbench import (
    JudgeParseError,
    VisualToolBenchSuite,
    judge_prompt,
    parse_verdict,
    score_task,
)
from providers.openai_compat import OpenAICompatProvider

MET = '{"explanation": "The answer names it.", "judge_result": "Met"}'
NOT_MET_FENCED = 'Here is my verdict:\n```json\n{"explanation": "Wrong month.", "judge_result": "Not Met"}\n```'


@pytest.mark.parametrize(("reply", "met", "reason"), [
    (MET, True, "The answer names it."),
    (NOT_MET_FENCED, False, "Wrong month."),
    ('{"judge_result": " not met. ", "explanation": "x"}', False, "x"),
    ('Sure! {"explanation": "ok", "judge_result": "MET"} Hope that helps.', True, "ok"),
    ('{"judge_result": "Not_Met"}', False, ""),
])
def test_parse_verdict_reads_met_and_not_met(reply: str, met: bool, reason: str) -> None:
    v = parse_verdict(reply)
    assert (v.met, v.reason) == (met, reason)


@pytest.mark.parametrize("reply", [
    None, "", "Met", '{"explanation": "no verdict"}', '{"judge_result": "Partially Met"}',
    '{"judge_result": true}', "[1, 2]", '{"judge_result": "Met"',
    # an integer past Python's 4,300-digit limit: json raises a plain ValueError, not JSONDecodeError
    '{"judge_result": ' + "9" * 5000 + "}", 'The verdict: {"x": ' + "9" * 5000 + "} ok",
])
def test_unreadable_replies_raise_instead_of_not_met(reply: str | None) -> None:
    with pytest.raises(JudgeParseError):
        parse_verdict(reply)


def test_judge_prompt_carries_the_four_inputs_and_the_notes() -> None:
    text = judge_prompt("Q?", "GOLD", "RUBRIC", "ANSWER")
    for part in ("Q?", "GOLD", "RUBRIC", "ANSWER", '"judge_result"', "Not Met", "lenient", "implicitly"):
        assert part in text


@dataclass
class JudgeServer:
    """An OpenAI-compatible /chat/completions on 127.0.0.1 with a scripted reply per request."""

    script: Callable[[str, int], tuple[int, str]]
    barrier: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    arrived: int = 0
    all_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    concurrent: bool = True
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        self.arrived += 1
        if self.arrived <= self.barrier:
            # Hold the first requests until all of them are in flight: proves they run together.
            if self.arrived == self.barrier:
                self.all_arrived.set()
            try:
                await asyncio.wait_for(self.all_arrived.wait(), 10)
            except TimeoutError:
                self.concurrent = False
        status, content = self.script(body["messages"][0]["content"], int(body.get("seed", -1)))
        if status != 200:
            return web.json_response({"error": {"message": "boom"}}, status=status)
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": content},
                                               "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

    def seeds_for(self, rubric: str) -> list[int]:
        return [b.get("seed", -1) for b in self.bodies if f"\n{rubric}\n" in b["messages"][0]["content"]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    runners: list[web.AppRunner] = []

    async def start(script: Callable[[str, int], tuple[int, str]], barrier: int = 0) -> JudgeServer:
        server = JudgeServer(script=script, barrier=barrier)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", server.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        server.url = f"http://127.0.0.1:{port}/v1"
        return server

    yield start
    for r in runners:
        await r.cleanup()


def _tasks(tmp_path: Path) -> dict[str, Task]:
    path = write_parquet(tmp_path / "test.parquet", sample_rows()[:2])
    suite = VisualToolBenchSuite({"path": str(path)}, BlobStore(tmp_path / "blobs"))
    return {t.id: t for t in suite.load() if isinstance(t, Task)}


def _rubric_section(prompt: str) -> str:
    return prompt.split("### Rubric criterion\n", 1)[1].split("\n", 1)[0]


async def test_rubrics_are_judged_concurrently_and_pooled(tmp_path: Path, serve: Callable[..., Any]) -> None:
    def script(prompt: str, seed: int) -> tuple[int, str]:
        rubric = _rubric_section(prompt)
        if rubric == "Says July":
            return 200, NOT_MET_FENCED
        if rubric == "Is concise":
            return 200, ("I would say it is met." if seed == 0 else MET)
        if rubric == "Notes the shared March peak" and seed == 0:
            return 500, ""
        return 200, MET

    server = await serve(script, barrier=4)
    judge = OpenAICompatProvider(base_url=server.url, model="judge-test")
    task = _tasks(tmp_path)[MULTI_ID]
    try:
        score = await score_task(task, Trajectory(answers=["March", "July", "Both peak in March"]), judge)
    finally:
        await judge.close()

    assert score.error is None and server.concurrent
    assert score.details["verdicts"][1][0] == {"rubric_id": "m2", "weight": 5, "met": False, "reason": "Wrong month."}
    # m1 (4) + m3 (1) + m4 (3) met of 13; m2 (weight 5) failed, so APR fails.
    assert score.details["ars"] == pytest.approx(8 / 13)
    assert score.value == 0.0 and score.details["apr"] == 0.0
    assert score.details["turn_ars"] == [1.0, pytest.approx(1 / 6), 1.0]
    assert server.seeds_for("Is concise") == [0, 1]
    assert server.seeds_for("Notes the shared March peak") == [0, 1]
    assert all(b["response_format"] == {"type": "json_object"} and "temperature" not in b for b in server.bodies)
    first = next(b for b in server.bodies if "\nSays March\n" in b["messages"][0]["content"])
    assert "Which month had the highest revenue?" in first["messages"][0]["content"]
    assert "March." in first["messages"][0]["content"] and first["model"] == "judge-test"


async def test_unreadable_judge_gives_judge_error_not_a_silent_fail(tmp_path: Path,
                                                                    serve: Callable[..., Any]) -> None:
    def script(prompt: str, seed: int) -> tuple[int, str]:
        return 200, ("no idea" if _rubric_section(prompt) == "States 42 kPa" else MET)

    server = await serve(script)
    judge = OpenAICompatProvider(base_url=server.url, model="judge-test")
    try:
        score = await score_task(_tasks(tmp_path)[SINGLE_ID], Trajectory(answers=["42 kPa"]), judge)
    finally:
        await judge.close()
    assert score.value is None
    assert score.error is not None and score.error.startswith("judge_error:") and "r-1" in score.error
    assert server.seeds_for("States 42 kPa") == [0, 1, 2]
    assert score.details["verdicts"][0][1]["met"] is True


async def test_turn_without_answer_fails_its_rubrics_without_a_call(tmp_path: Path,
                                                                    serve: Callable[..., Any]) -> None:
    server = await serve(lambda prompt, seed: (200, MET))
    judge = OpenAICompatProvider(base_url=server.url, model="judge-test")
    try:
        score = await score_task(_tasks(tmp_path)[MULTI_ID], Trajectory(answers=["March", None]), judge)
    finally:
        await judge.close()
    assert len(server.bodies) == 1 and score.details["judge_calls"] == 1
    assert score.details["ars"] == pytest.approx(4 / 13) and score.value == 0.0


async def test_suite_without_judge_reports_judge_error(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    suite = VisualToolBenchSuite({"path": "unused"}, BlobStore(tmp_path / "b"))
    setting = suite.default_settings()[0]
    score = await suite.score(tasks[SINGLE_ID], Trajectory(answers=["x"]), setting,
                              ScoreContext(blobs=BlobStore(tmp_path / "b"), services={}))
    assert score.value is None and score.error is not None and score.error.startswith("judge_error")


# --- reference counting and the reference's judge template (fixture reference repository) -----


def _fixture_criterion(prompt: str) -> str:
    return prompt.split(" C=", 1)[1].split(" A=", 1)[0]


async def test_reference_counting_failed_calls_are_not_met_and_verdicts_are_exact(
        tmp_path: Path, serve: Callable[..., Any]) -> None:
    def script(prompt: str, seed: int) -> tuple[int, str]:
        criterion = _fixture_criterion(prompt)
        if criterion == "Says March":
            return 500, ""  # every attempt fails: the reference stores "Not Met" and counts it
        if criterion == "Says July":
            return 200, '{"explanation": "lower case", "judge_result": "met"}'  # neither: no weight, APR kept
        return 200, MET

    server = await serve(script)
    judge = OpenAICompatProvider(base_url=server.url, model="judge-test")
    suite = VisualToolBenchSuite({"path": "unused"}, BlobStore(tmp_path / "b"))
    template = suite.texts.get("judge")
    try:
        score = await score_task(_tasks(tmp_path)[MULTI_ID], Trajectory(answers=["March", "July", "Both"]), judge,
                                 template=template, counting="reference")
    finally:
        await judge.close()
    assert score.error is None
    verdicts = score.details["verdicts"]
    assert verdicts[0][0]["met"] is False and "counted as Not Met" in verdicts[0][0]["reason"]
    assert verdicts[1][0]["met"] is None
    # met: m3 (1) + m4 (3) of 13; m1 (weight 4) is Not Met, so APR fails.
    assert score.details["ars"] == pytest.approx(4 / 13) and score.value == 0.0
    first = server.bodies[0]["messages"][0]["content"]
    assert first.startswith("\n        SYNTH judge. Q=") and "G=March. C=Says March A=March" in first


async def test_reference_counting_loses_the_task_on_a_non_json_reply(tmp_path: Path,
                                                                     serve: Callable[..., Any]) -> None:
    server = await serve(lambda prompt, seed: (200, NOT_MET_FENCED))  # prose around the JSON
    judge = OpenAICompatProvider(base_url=server.url, model="judge-test")
    try:
        score = await score_task(_tasks(tmp_path)[SINGLE_ID], Trajectory(answers=["42 kPa"]), judge,
                                 counting="reference")
        fixed = await score_task(_tasks(tmp_path)[SINGLE_ID], Trajectory(answers=["42 kPa"]), judge)
    finally:
        await judge.close()
    assert score.value is None and score.error is not None and "loses this chunk" in score.error
    assert len([b for b in server.bodies if "States 42 kPa" in b["messages"][0]["content"]]) == 2  # no retry
    assert fixed.error is None and fixed.details["ars"] == 0.0  # the tolerant reading finds "Not Met"
