"""The oracle's programs, run through the real sandbox pool, solve every generated task type.

Also the oracle policy itself, driven turn by turn with real tool results: its answer comes
only from the tool, so a missing sandbox gives a wrong answer, not a right one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.tir_synth import GENERATORS, TIRSynth
from fasteval.suites.tirbench import score_item
from fasteval.tools.base import ToolContext, ToolResult, make_tool
from providers.sim import POLICIES, SimModel
from providers.sim.oracle import answer_from_tool_output, plan_for
from sandbox import SandboxPool

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

CHOICE_TYPES = {"proportion", "color", "rotation_game"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[SandboxPool]:
    async with SandboxPool(2) as p:
        yield p


def _tasks(tmp_path: Path, seed: int, n: int) -> tuple[BlobStore, list[Task]]:
    blobs = BlobStore(tmp_path / "blobs")
    tasks = [t for t in TIRSynth({"seed": seed, "n_per_type": n}, blobs).load() if isinstance(t, Task)]
    return blobs, tasks


def _ctx(blobs: BlobStore, task: Task, services: dict[str, Any], fidelity: str = "reference") -> ToolContext:
    return ToolContext(blobs=blobs, task=task, images=list(task.turns[0].images), fidelity=fidelity,
                       session_id=task.id, services=services)  # fmt: skip


def _score(task: Task, extracted: str) -> float:
    meta = {"prompt": task.turns[0].text, "difficulty": task.metadata.get("difficulty")}
    return score_item(task.metadata["task_type"], extracted, extracted, task.reference, "reference", meta)


@pytest.mark.parametrize("fidelity", ["reference", "fixed"])
async def test_oracle_programs_score_full_marks_on_every_type(
    tmp_path: Path, pool: SandboxPool, fidelity: str
) -> None:
    blobs, tasks = _tasks(tmp_path, seed=7, n=3)
    assert {t.metadata["task_type"] for t in tasks} == set(GENERATORS)
    tool = make_tool("python_image_processing")
    for task in tasks:
        plan = plan_for(task.turns[0].text)
        assert plan is not None and plan.task_type == task.metadata["task_type"], task.id
        ctx = _ctx(blobs, task, {"sandbox": pool}, fidelity)
        results: list[ToolResult] = [await tool.run({"code": code}, ctx) for code in plan.steps]
        assert all(r.status == "ok" for r in results), [r.output for r in results]
        extracted = answer_from_tool_output(results[-1].output)
        assert extracted is not None, results[-1].output
        assert _score(task, extracted) == 1.0, (task.id, extracted, task.reference)


def _body(task: Task, history: list[dict[str, Any]]) -> dict[str, Any]:
    tool = make_tool("python_image_processing").spec()
    user = {"role": "user", "content": [{"type": "text", "text": task.turns[0].text}]}
    return {"messages": [user, *history], "tools": [tool], "seed": 3}


async def _drive_oracle(blobs: BlobStore, task: Task, services: dict[str, Any]) -> tuple[str, int]:
    """Run the oracle policy against the real tool until it answers; (answer, tool calls)."""
    tool = make_tool("python_image_processing")
    history: list[dict[str, Any]] = []
    for n in range(6):
        reply = POLICIES["oracle"](SimModel(name="oracle", policy="oracle"), _body(task, history), n)
        if not reply.get("tool_calls"):
            return str(reply["content"]), n
        call = reply["tool_calls"][0]
        result = await tool.run(json.loads(call["function"]["arguments"]), _ctx(blobs, task, services))
        content: list[dict[str, Any]] = [{"type": "text", "text": result.output}]
        content += [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}} for _ in result.images]
        history += [{"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": call["id"], "content": content}]
    raise AssertionError("oracle did not answer within 6 rounds")


async def test_oracle_policy_answers_from_the_tool_and_scores_full_marks(tmp_path: Path, pool: SandboxPool) -> None:
    blobs, tasks = _tasks(tmp_path, seed=11, n=1)
    for task in tasks:
        text, calls = await _drive_oracle(blobs, task, {"sandbox": pool})
        assert calls >= 1
        assert _score(task, text) == 1.0, (task.id, text, task.reference)


async def test_oracle_policy_is_wrong_when_the_sandbox_is_missing(tmp_path: Path) -> None:
    blobs, tasks = _tasks(tmp_path, seed=11, n=1)
    for task in tasks:
        text, calls = await _drive_oracle(blobs, task, {})
        assert calls == 1 and "cannot tell" in text
        if task.metadata["task_type"] not in CHOICE_TYPES:  # letter snapping can still hit by chance
            assert _score(task, text) < 1.0, task.id
