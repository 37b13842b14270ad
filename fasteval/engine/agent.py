"""The agent loop of one job: ask the model, run the tools it calls, repeat, turn by turn.

Two tool-call protocols: native ``tool_calls`` and the text protocol (the first
``<tool_call>{json}</tool_call>`` span, one call per round, as VistaHop's harness does). A suite
may also name a harness's own text protocol for a job (``Suite.text_protocol``: DeepEyes'
``<tool_call>``, Mini-o3's ``<grounding>``), which reads the replies, brings its tools and sends
the results back its way.
A round is one model request; ``max_rounds`` bounds the rounds of each user turn. Tool
failures (bad JSON, unknown tool, bad arguments, crashes, timeouts) are shown to the model
and logged on the trajectory; provider failures end the job as an error, never as an answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from fasteval.core.redact import redact_text
from fasteval.core.tagged import Tagged
from fasteval.core.types import ImageRef, Message, Task, ToolCall, Trajectory, Usage
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import Setting, Suite
from fasteval.tools.base import Tool, ToolContext, ToolResult
from fasteval.tools.text_protocols.base import TextProtocol
from providers.base import TOOL_IMAGES_PREFIX, ChatRequest, ChatResponse, ProviderError, ToolCallRequest
from providers.client import ModelClient

_TEXT_CALL = Tagged("<tool_call>", "</tool_call>")


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


def parse_text_tool_call(content: str, arguments_only: bool = False) -> ToolCallRequest | None:
    """The first <tool_call> span as a call; None (a final answer) if absent or not valid JSON.

    ``arguments_only`` reads the arguments from ``"arguments"`` alone (VistaHop's runner), not
    from ``"parameters"`` as a fallback.
    """
    call = _TEXT_CALL.first(content or "")
    if call is None:
        return None
    try:
        obj = orjson.loads(call.strip())
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", {}) if arguments_only else obj.get("arguments", obj.get("parameters", {}))
    return ToolCallRequest(id="text_call", name=obj["name"], arguments=orjson.dumps(args).decode())


def _assistant_message(resp: ChatResponse, native_calls: list[ToolCallRequest]) -> Message:
    msg: Message = {"role": "assistant", "content": resp.content}
    if resp.native is not None:  # e.g. thinking blocks the provider needs back verbatim
        msg["native"] = resp.native
    if native_calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in native_calls]
    return msg


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
        result = ToolResult.fail(f"Tool {call.name} failed: {type(e).__name__}: {e}")
    if result.status == "error":
        # An upstream may echo a key into an error; the model (a third party) must not see it either.
        result.output, result.error = redact_text(result.output), result.error and redact_text(result.error)
    return result, args, time.monotonic() - t0


def _standard_result_messages(call_id: str, result: ToolResult, images_in_tool: bool) -> tuple[Message, list[ImageRef]]:
    if result.images and images_in_tool:
        content: Any = [{"type": "text", "text": result.output}] + [{"type": "image", "image": r} for r in result.images]
        return {"role": "tool", "tool_call_id": call_id, "content": content}, []
    return {"role": "tool", "tool_call_id": call_id, "content": result.output}, list(result.images)


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


def _rejected_call(protocol: TextProtocol, reason: str, raw: str, turn: int, round_: int) -> tuple[ToolCall, ToolResult]:
    """A call the model wrote but the protocol could not read: logged as a failed call."""
    result = ToolResult.fail(reason)
    return ToolCall(id="text_call", name=protocol.tool_name, args={"text": raw}, status="error", output=reason,
                    error=reason, turn=turn, round=round_), result


def _text_result_message(result: ToolResult) -> Message:
    content: list[dict[str, Any]] = [{"type": "text", "text": f"<tool_response>\n{result.output}\n</tool_response>"}]
    content += [{"type": "image", "image": r} for r in result.images]
    return {"role": "user", "content": content}


def _protocol_feedback(protocol: TextProtocol, traj: Trajectory, logged: list[tuple[ToolCall, ToolResult]]) -> bool:
    """Send each call's result back the protocol's way; True when the harness ends the turn there."""
    for call, result in logged:
        if protocol.ends_turn(call):
            return True
        traj.messages.extend(protocol.result_messages(call, result))
    return False


async def run_agent(task: Task, job_seed: int, job_id: str, env: AgentEnv, traj: Trajectory | None = None) -> Trajectory:
    """Play every user turn of ``task`` into ``traj``.

    Raises ProviderError when the model fails for good; ``traj`` then holds what happened so
    far, which the caller records with the error.
    """
    traj = traj if traj is not None else Trajectory()
    traj.seed = job_seed
    suite, setting = env.suite, env.setting
    protocol = suite.text_protocol(task, setting)
    if protocol is not None:  # a harness's own text protocol: its tools join the job's
        env = dataclasses.replace(env, tools={**env.tools, **protocol.tools()})
    specs = [t.spec() for t in env.tools.values()]
    text_protocol = setting.tool_protocol == "text" or protocol is not None
    system = protocol.system_prompt if protocol is not None else suite.system_prompt(task, setting, specs)
    if system:
        traj.messages.append({"role": "system", "content": system})
    seen_images: list[ImageRef] = []
    ctx = ToolContext(blobs=env.blobs, task=task, images=seen_images, fidelity=setting.fidelity,
                      session_id=job_id, services=env.services)
    profile = str(setting.options.get("image_profile", "original"))
    for turn_index in range(len(task.turns)):
        if turn_index > 0:
            history = suite.history_before_turn(task, turn_index, setting, traj)
            if history is not None:
                traj.messages = ([{"role": "system", "content": system}] if system else []) + history
        opening = suite.user_message(task, turn_index, setting, traj)
        # Tools see the images the model was shown (a suite may show only some, e.g. the first).
        content = opening.get("content")
        shown = [p["image"] for p in content if p.get("type") == "image"] if isinstance(content, list) else []
        if setting.options.get("tool_images") == "turn":  # tools see this turn's images only
            seen_images.clear()
        seen_images.extend(ref for ref in shown if ref not in seen_images)
        traj.messages.append(opening)
        usage = Usage()
        traj.usage_by_turn.append(usage)
        answer: str | None = None
        rounds = 0
        while True:
            if rounds >= setting.max_rounds:
                traj.termination = "max_rounds"
                traj.termination_reason = f"turn {turn_index} used all {setting.max_rounds} rounds"
                answer = suite.answer_on_max_rounds(task, turn_index, setting)
                break
            over = _images_over_limit(traj.messages, env.client.provider.capabilities().max_images)
            if over is not None:
                traj.termination = "image_limit"
                traj.termination_reason = f"turn {turn_index} round {rounds}: {over}"
                traj.answers.append(None)
                return traj
            sent = suite.tool_specs(task, turn_index, setting, specs) if specs else None
            sent = specs if sent is None else sent
            request = ChatRequest(messages=traj.messages, tools=None if text_protocol or not sent else sent,
                                  params=env.params, seed=job_seed, image_profile=profile)
            try:
                resp = await env.client.chat(request)
            except ProviderError as e:
                if e.kind == "context_overflow":
                    traj.termination = "context_overflow"
                    traj.termination_reason = str(e)
                    traj.answers.append(None)
                    return traj
                raise
            rounds += 1
            traj.rounds += 1
            usage.add(resp.usage)
            traj.prompt_tokens_by_round.append(resp.usage.prompt_tokens)
            if resp.finish_reason == "length" and not resp.tool_calls:
                # cut by the output-token limit: its own termination on every wire, never `answered`; the
                # partial text is kept and scored as a reference harness would, whitespace counts as nothing
                traj.messages.append(_assistant_message(resp, []))
                traj.termination = "max_tokens"
                traj.termination_reason = f"turn {turn_index} hit the output token limit"
                text = resp.content if resp.content and resp.content.strip() else None
                answer = suite.extract_answer(text, setting) if text else None
                break
            if resp.finish_reason == "refusal" and not resp.tool_calls:
                # the model declined (a provider safety stop): its reply is scored as given, not retried
                traj.messages.append(_assistant_message(resp, []))
                traj.termination = "refusal"
                traj.termination_reason = "the provider reported a refusal"
                traj.answers.append(suite.extract_answer(resp.content, setting) if resp.content else None)
                return traj
            logged: list[tuple[ToolCall, ToolResult]] = []  # protocol calls, in order, for their feedback
            if protocol is not None:
                parsed = protocol.parse(resp.content or "")
                calls = parsed.calls
                traj.messages.append({"role": "assistant", "content": parsed.content,
                                      **({"native": resp.native} if resp.native is not None else {})})
                if parsed.rejected is not None:
                    logged.append(_rejected_call(protocol, parsed.rejected, parsed.raw_call, turn_index, rounds))
                    traj.tool_calls.append(logged[-1][0])
            elif text_protocol:
                strict = bool(setting.options.get("tool_call_arguments_only"))
                text_call = parse_text_tool_call(resp.content or "", strict) if specs else None
                calls = [text_call] if text_call else []
                traj.messages.append({"role": "assistant", "content": resp.content or "",
                                      **({"native": resp.native} if resp.native is not None else {})})
            else:
                calls = resp.tool_calls
                traj.messages.append(_assistant_message(resp, calls))
            if not calls and not logged:
                answer = suite.extract_answer(resp.content or "", setting)
                traj.termination = "answered"
                traj.termination_reason = None
                break
            pending_images: list[ImageRef] = []
            for call in calls:
                result, args, latency = await execute_tool(call, env, ctx)
                traj.tool_calls.append(ToolCall(
                    id=call.id, name=call.name, args=args, status=result.status, output=result.output[:20000],
                    error=result.error, latency_s=round(latency, 4), images=list(result.images),
                    turn=turn_index, round=rounds, extra=result.extra))
                custom = suite.tool_result_messages(traj.tool_calls[-1], result, setting)
                if custom is not None:
                    traj.messages.extend(custom)
                elif protocol is not None:
                    logged.append((traj.tool_calls[-1], result))
                elif text_protocol:
                    traj.messages.append(_text_result_message(result))
                else:
                    msg, moved = _standard_result_messages(call.id, result, env.client.provider.tool_message_images())
                    traj.messages.append(msg)
                    pending_images.extend(moved)
            if pending_images:
                traj.messages.append({"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_PREFIX + ":"}]
                                      + [{"type": "image", "image": r} for r in pending_images]})
            if protocol is not None and _protocol_feedback(protocol, traj, logged):
                # the harness stops here (e.g. DeepEyes on an error): the reply is the answer
                answer = suite.extract_answer(resp.content or "", setting)
                traj.termination = "answered"
                traj.termination_reason = f"{protocol.name}: {traj.tool_calls[-1].error or 'the harness ended the episode'}"
                break
        traj.answers.append(answer)
    return traj
