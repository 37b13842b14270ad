"""The agent loop of one job: ask the model, run the tools it calls, repeat, turn by turn.

One path whatever the tool-call protocol (``fasteval.tools.call_protocol``): each round asks the
model once, the job's protocol reads the reply into calls or an answer, the calls run here, and
the protocol writes each result back (unless the suite words it its own way). The protocol is
the provider's native ``tool_calls``, the built-in ``<tool_call>`` text (``tool_protocol:
text``: the first span, one call per round, as VistaHop's harness does), or a harness's own
(``Suite.text_protocol``: DeepEyes' ``<tool_call>``, Mini-o3's ``<grounding>``), which also
brings its tools and its system prompt and may end the turn on a call.
A round is one model request; ``max_rounds`` bounds the rounds of each user turn. A turn ends
with an ``Ending`` (answered, max_rounds, max_tokens, refusal, context_overflow, image_limit),
written on the trajectory in one place (``Trajectory.end``). Tool failures (bad JSON, unknown
tool, bad arguments, crashes, timeouts) are shown to the model and logged on the trajectory;
provider failures end the job as an error, never as an answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from fasteval.core.errors import OutOfDescriptors, descriptor_fault
from fasteval.core.redact import redact_text
from fasteval.core.types import Ending, Message, Task, ToolCall, Trajectory, Usage
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import Setting, Suite
from fasteval.tools.base import Tool, ToolContext, ToolResult
from fasteval.tools.call_protocol import (
    CallProtocol,
    NativeCalls,
    ParsedTurn,
    ToolCallText,
    parse_text_tool_call,
)
from providers import ChatRequest, ChatResponse, ModelClient, ProviderError, ToolCallRequest

__all__ = ["AgentEnv", "execute_tool", "parse_text_tool_call", "run_agent"]

_STOPPED = ("length", "refusal")
"""Finish reasons that end a reply without calls: cut by the output-token limit, or declined."""


@dataclass(slots=True)
class AgentEnv:
    """What the loop needs besides the task: the model, its tools and shared services."""

    client: ModelClient
    suite: Suite
    setting: Setting
    tools: dict[str, Tool]
    blobs: BlobStore
    services: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    tool_timeout_s: float = 300.0


@dataclass(slots=True)
class _Episode:
    """One job's fixed parts, set up once: what every round reads."""

    task: Task
    env: AgentEnv
    protocol: CallProtocol
    specs: list[dict[str, Any]]
    system: str | None
    ctx: ToolContext
    seed: int
    profile: str


def _protocol_for(task: Task, env: AgentEnv) -> CallProtocol:
    """The job's tool-call protocol: the suite's harness protocol, else the setting's."""
    protocol = env.suite.text_protocol(task, env.setting)
    if protocol is not None:
        return protocol
    if env.setting.tool_protocol == "text":
        return ToolCallText(arguments_only=bool(env.setting.options.get("tool_call_arguments_only")),
                            has_tools=bool(env.tools))
    return NativeCalls(env.client.provider)


def _episode(task: Task, job_seed: int, job_id: str, env: AgentEnv) -> _Episode:
    protocol = _protocol_for(task, env)
    brought = protocol.tools()
    if brought:  # a harness's protocol: its tools join the job's
        env = dataclasses.replace(env, tools={**env.tools, **brought})
    specs = [t.spec() for t in env.tools.values()]
    setting = env.setting
    system = protocol.system_prompt if protocol.own_system_prompt else env.suite.system_prompt(task, setting, specs)
    ctx = ToolContext(blobs=env.blobs, task=task, images=[], fidelity=setting.fidelity, session_id=job_id,
                      services=env.services)
    return _Episode(task, env, protocol, specs, system, ctx, job_seed,
                    str(setting.options.get("image_profile", "original")))


async def execute_tool(call: ToolCallRequest, env: AgentEnv, ctx: ToolContext) -> tuple[ToolResult, Any, float]:
    """Run one requested call; every failure becomes an error result the model can read."""
    t0 = time.monotonic()
    try:
        args = orjson.loads(call.arguments) if call.arguments.strip() else {}
    except orjson.JSONDecodeError as e:
        return ToolResult.fail(f"Invalid JSON in arguments of {call.name}: {e}"), call.arguments, 0.0
    if not isinstance(args, dict):
        return ToolResult.fail(f"Arguments of {call.name} must be a JSON object"), args, 0.0
    tool = env.tools.get(call.name)
    if tool is None and env.suite is not None and (alias := env.suite.tool_alias(call.name, env.setting)):
        tool = env.tools.get(alias)
    if tool is None:
        return ToolResult.fail(f"Unknown tool {call.name!r}; available tools: {sorted(env.tools)}"), args, 0.0
    limiters = env.services.get("limiters")
    fidelity = tool.options.get("fidelity", ctx.fidelity)
    if fidelity != ctx.fidelity:  # a tool may follow another harness than the suite's scoring
        ctx = dataclasses.replace(ctx, fidelity=fidelity)
    try:
        async with asyncio.timeout(env.tool_timeout_s):
            if tool.limiter and limiters is not None:
                size = int(tool.options.get("concurrency", tool.default_concurrency))
                async with limiters.slot(tool.limiter, size):
                    result = await tool.run(args, ctx)
            else:
                result = await tool.run(args, ctx)
    except TimeoutError:
        result = ToolResult.fail(f"Tool {call.name} timed out after {env.tool_timeout_s:g} s")
    except asyncio.CancelledError:
        raise
    except Exception as e:  # a tool bug must not kill the job, let alone the sweep
        if (fault := descriptor_fault(e)) is not None:  # the process's limit: no fault of the tool's
            raise OutOfDescriptors(fault, f"running the tool {call.name}") from e
        result = ToolResult.fail(f"Tool {call.name} failed: {type(e).__name__}: {e}")
    if result.status == "error":
        # An upstream may echo a key into an error; the model (a third party) must not see it either.
        result.output, result.error = redact_text(result.output), result.error and redact_text(result.error)
    return result, args, time.monotonic() - t0


def _images_over_limit(messages: list[Message], limit: int | None) -> str | None:
    """Why the next request cannot be sent, when the conversation holds more images than the server
    takes (vLLM's ``--limit-mm-per-prompt``): its 400 would end the job as a generic error."""
    if limit is None:
        return None
    n = sum(1 for m in messages if isinstance(m.get("content"), list)
            for p in m["content"] if p.get("type") == "image")
    if n <= limit:
        return None
    return (f"the conversation holds {n} images, more than the {limit} the server takes in one prompt "
            f"(--limit-mm-per-prompt in serve.args)")


async def run_agent(task: Task, job_seed: int, job_id: str, env: AgentEnv, traj: Trajectory | None = None) -> Trajectory:
    """Play every user turn of ``task`` into ``traj``.

    Raises ProviderError when the model fails for good; ``traj`` then holds what happened so
    far, which the caller records with the error.
    """
    traj = traj if traj is not None else Trajectory()
    traj.seed = job_seed
    ep = _episode(task, job_seed, job_id, env)
    if ep.system:
        traj.messages.append({"role": "system", "content": ep.system})
    for turn_index in range(len(task.turns)):
        _open_turn(ep, traj, turn_index)
        ending = await _play_turn(ep, traj, turn_index)
        traj.end(ending)
        if ending.final:
            break
    return traj


def _open_turn(ep: _Episode, traj: Trajectory, turn_index: int) -> None:
    """A user turn's history (a suite may replace it), its opening message and the images tools see."""
    suite, setting, task = ep.env.suite, ep.env.setting, ep.task
    if turn_index > 0:
        history = suite.history_before_turn(task, turn_index, setting, traj)
        if history is not None:
            traj.messages = ([{"role": "system", "content": ep.system}] if ep.system else []) + history
    opening = suite.user_message(task, turn_index, setting, traj)
    # Tools see the images the model was shown (a suite may show only some, e.g. the first).
    content = opening.get("content")
    shown = [p["image"] for p in content if p.get("type") == "image"] if isinstance(content, list) else []
    seen = ep.ctx.images
    if setting.options.get("tool_images") == "turn":  # tools see this turn's images only
        seen.clear()
    seen.extend(ref for ref in shown if ref not in seen)
    traj.messages.append(opening)


async def _play_turn(ep: _Episode, traj: Trajectory, turn_index: int) -> Ending:
    """The rounds of one user turn until it ends: each asks the model once and runs the calls it makes."""
    env, protocol = ep.env, ep.protocol
    suite, setting = env.suite, env.setting
    usage = Usage()
    traj.usage_by_turn.append(usage)
    rounds = 0
    while True:
        stop = _before_round(ep, traj, turn_index, rounds)
        if stop is not None:
            return stop
        try:
            resp = await env.client.chat(_request(ep, traj, turn_index))
        except ProviderError as e:
            if e.kind == "context_overflow":
                return Ending("context_overflow", str(e), final=True)
            raise
        rounds += 1
        traj.rounds += 1
        usage.add(resp.usage)
        traj.prompt_tokens_by_round.append(resp.usage.prompt_tokens)
        traj.completion_tokens_by_round.append(resp.usage.completion_tokens)
        traj.turn_by_round.append(turn_index)
        if not resp.tool_calls and resp.finish_reason in _STOPPED:
            return _stopped(ep, traj, resp, turn_index)
        turn = protocol.read(resp)
        traj.messages.append(protocol.assistant_message(resp, turn))
        if not turn.calls and turn.rejected is None:
            return Ending("answered", None, suite.extract_answer(resp.content or "", setting))
        ended = turn.rejected is not None and _rejected(ep, traj, turn, turn_index, rounds)
        for request in turn.calls:
            result, args, latency = await execute_tool(request, env, ep.ctx)
            call = ToolCall(
                id=request.id, name=request.name, args=args, status=result.status, output=result.output[:20000],
                error=result.error, latency_s=round(latency, 4), images=list(result.images),
                turn=turn_index, round=rounds, extra=result.extra)
            traj.tool_calls.append(call)
            custom = suite.tool_result_messages(call, result, setting)
            if custom is not None:
                traj.messages.extend(custom)
            elif not ended:
                ended = protocol.feed_back(call, result, traj.messages)
        protocol.end_round(traj.messages)
        if ended:  # the harness stops here (e.g. DeepEyes on an error): the reply is the answer
            why = traj.tool_calls[-1].error or "the harness ended the episode"
            return Ending("answered", f"{protocol.name}: {why}", suite.extract_answer(resp.content or "", setting))


def _before_round(ep: _Episode, traj: Trajectory, turn_index: int, rounds: int) -> Ending | None:
    """Why the turn cannot ask again: its rounds are spent, or the server would refuse the images."""
    env, setting = ep.env, ep.env.setting
    if rounds >= setting.max_rounds:
        return Ending("max_rounds", f"turn {turn_index} used all {setting.max_rounds} rounds",
                      env.suite.answer_on_max_rounds(ep.task, turn_index, setting))
    over = _images_over_limit(traj.messages, env.client.provider.capabilities().max_images)
    if over is not None:
        return Ending("image_limit", f"turn {turn_index} round {rounds}: {over}", final=True)
    return None


def _request(ep: _Episode, traj: Trajectory, turn_index: int) -> ChatRequest:
    tools = None
    if ep.protocol.sends_tools and ep.specs:  # a text protocol's prompt describes the tools instead
        sent = ep.env.suite.tool_specs(ep.task, turn_index, ep.env.setting, ep.specs)
        tools = (ep.specs if sent is None else sent) or None
    return ChatRequest(messages=traj.messages, tools=tools, params=ep.env.params, seed=ep.seed,
                       image_profile=ep.profile)


def _stopped(ep: _Episode, traj: Trajectory, resp: ChatResponse, turn_index: int) -> Ending:
    """A reply the provider cut at the output-token limit, or a refusal: kept, and the turn ends."""
    msg: Message = {"role": "assistant", "content": resp.content}
    if resp.native is not None:
        msg["native"] = resp.native
    traj.messages.append(msg)
    suite, setting = ep.env.suite, ep.env.setting
    if resp.finish_reason == "length":
        # its own termination on every wire, never `answered`; the partial text is kept and scored
        # as a reference harness would, whitespace counts as nothing
        text = resp.content if resp.content and resp.content.strip() else None
        return Ending("max_tokens", f"turn {turn_index} hit the output token limit",
                      suite.extract_answer(text, setting) if text else None)
    # the model declined (a provider safety stop): its reply is scored as given, not retried
    return Ending("refusal", "the provider reported a refusal",
                  suite.extract_answer(resp.content, setting) if resp.content else None, final=True)


def _rejected(ep: _Episode, traj: Trajectory, turn: ParsedTurn, turn_index: int, round_: int) -> bool:
    """A call the model wrote but the protocol could not read: logged as a failed call, its reason
    sent back; True when the harness ends the turn on it."""
    reason = turn.rejected or ""
    call = ToolCall(id="text_call", name=ep.protocol.tool_name, args={"text": turn.raw_call}, status="error",
                    output=reason, error=reason, turn=turn_index, round=round_)
    traj.tool_calls.append(call)
    return ep.protocol.feed_back(call, ToolResult.fail(reason), traj.messages)


