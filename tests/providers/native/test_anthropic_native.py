"""provider: anthropic against a loopback Messages API that validates like the real one."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from providers.anthropic import AnthropicProvider
from providers.base import ChatRequest, ProviderError
from providers.client import ModelClient, RetryPolicy
from providers.sim import SimModel
from providers.sim.spec import Faults
from tests.providers.native.native_support import demo_suite, native_sim, root, sweep

KEY = "sk-ant-loopback-0123456789"
PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a") + b"\x00" * 32).decode()


def _model(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "provider": "anthropic", "model": "claude-sim", "api_key_env": "FE_TEST_ANTHROPIC_KEY", **kw}


async def test_tool_loop_with_images_in_tool_results_and_prompt_caching(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_ANTHROPIC_KEY", KEY)
    async with native_sim([SimModel("claude-sim", policy="tools")], {"anthropic": KEY}) as sim:
        res, records = await sweep(tmp_path, {"models": [_model("claude", base_url=root(sim))],
                                              "suites": [demo_suite(4)], "seeds": [0]})
    assert res.ok == 4, [r["error"] for r in records]
    assert all(r["score"] == 1.0 for r in records)
    for r in records:
        tool_msgs = [m for m in r["trajectory"]["messages"] if m["role"] == "tool"]
        zoom = next(m for m in tool_msgs if isinstance(m["content"], list))
        assert any(p["type"] == "image" for p in zoom["content"])  # the crop stays inside the tool result
        assert not any(m["role"] == "user" and "Images returned" in str(m["content"]) for m in r["trajectory"]["messages"])
        # three rounds: the later ones read the prefix the earlier ones wrote
        assert r["usage"]["cache_read_tokens"] > 0 and r["usage"]["cache_write_tokens"] > 0
        assert r["usage"]["prompt_tokens"] >= r["usage"]["cache_read_tokens"] + r["usage"]["cache_write_tokens"]


async def test_thinking_blocks_are_sent_back_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With thinking on, the API rejects a tool-use turn that does not start with its signed thinking."""
    monkeypatch.setenv("FE_TEST_ANTHROPIC_KEY", KEY)
    async with native_sim([SimModel("claude-sim", policy="tools")], {"anthropic": KEY}) as sim:
        res, records = await sweep(tmp_path, {
            "models": [_model("claude-think", base_url=root(sim), thinking_budget=2048,
                              params={"temperature": 0.2, "top_k": 5, "max_tokens": 1024})],
            "suites": [demo_suite(2)], "seeds": [0]})
    assert res.ok == 2, [r["error"] for r in records]
    natives = [m["native"] for r in records for m in r["trajectory"]["messages"] if "native" in m]
    assert natives and all(n["content"][0]["type"] == "thinking" for n in natives)


async def _client(sim_root: str, schedule: list[str]) -> tuple[ModelClient, Any]:
    return ModelClient("c", AnthropicProvider("claude-sim", base_url=sim_root, api_key_env="FE_TEST_ANTHROPIC_KEY"),
                       retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05)), schedule


@pytest.mark.parametrize(("fault", "kind"), [("429", "rate_limit"), ("529", "transient"), ("500", "transient")])
async def test_retryable_errors_back_off_then_succeed(fault: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_ANTHROPIC_KEY", KEY)
    model = SimModel("claude-sim", policy="scripted", default_reply="fine",
                     faults=Faults(schedule=[fault], retry_after_s=0.02))
    async with native_sim([model], {"anthropic": KEY}) as sim:
        client, _ = await _client(root(sim), [])
        resp = await client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        await client.close()
    assert resp.content == "fine"
    assert client.stats.by_kind == {kind: 1} and client.stats.retries == 1


@pytest.mark.parametrize(("fault", "kind"), [("overflow", "context_overflow"), ("401", "auth"), ("400", "fatal")])
async def test_final_errors_are_classified(fault: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_ANTHROPIC_KEY", KEY)
    model = SimModel("claude-sim", policy="scripted", faults=Faults(schedule=[fault]))
    async with native_sim([model], {"anthropic": KEY}) as sim:
        client, _ = await _client(root(sim), [])
        with pytest.raises(ProviderError) as err:
            await client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        await client.close()
    assert err.value.kind == kind and client.stats.requests == 1


async def test_wrong_key_is_auth_and_missing_variable_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    async with native_sim([SimModel("claude-sim", policy="scripted")], {"anthropic": KEY}) as sim:
        monkeypatch.setenv("FE_TEST_ANTHROPIC_KEY", "sk-ant-wrong")
        client, _ = await _client(root(sim), [])
        with pytest.raises(ProviderError) as err:
            await client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        await client.close()
        assert err.value.kind == "auth" and err.value.status == 401
        monkeypatch.delenv("FE_TEST_ANTHROPIC_KEY")
        client, _ = await _client(root(sim), [])
        with pytest.raises(ProviderError) as err:
            await client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        await client.close()
    assert err.value.kind == "auth" and "FE_TEST_ANTHROPIC_KEY" in str(err.value)


async def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    async with aiohttp.ClientSession() as s, s.post(url, data=orjson.dumps(body), headers=headers) as r:
        return r.status, await r.json()


@pytest.mark.parametrize(("messages", "extra", "needle"), [
    ([{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}], {}, "role"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], {}, "alternate"),
    ([{"role": "user", "content": "a"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
      {"role": "user", "content": "no result"}], {}, "tool_result"),
    ([{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                                               "data": PNG}}]}], {}, "media type"),
    ([{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}] * 5}], {},
     "maximum of 4"),
    ([{"role": "user", "content": "hi"}], {"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 1000},
     "budget_tokens"),
    ([{"role": "user", "content": "hi"}], {"seed": 1}, "Extra inputs"),
])
async def test_the_loopback_api_rejects_what_the_real_one_rejects(messages: list[dict[str, Any]], extra: dict[str, Any],
                                                                  needle: str) -> None:
    async with native_sim([SimModel("claude-sim", policy="scripted")], {"anthropic": KEY}) as sim:
        status, body = await _post(f"{root(sim)}/v1/messages",
                                   {"model": "claude-sim", "max_tokens": 100, "messages": messages, **extra})
    assert status == 400 and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert needle in body["error"]["message"]


async def test_translation_alternates_roles_and_puts_tool_results_first() -> None:
    async def resolve(ref: str, profile: str) -> str:
        return f"data:image/png;base64,{PNG}"

    provider = AnthropicProvider("claude-x", api_key_env=None, api_key="k", image_resolver=resolve)
    msgs = [{"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "image": "a" * 64}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "zoom", "arguments": '{"x": 1}'}},
                {"id": "c2", "type": "function", "function": {"name": "calc", "arguments": "not json"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "crop"},
                                                               {"type": "image", "image": "b" * 64}]},
            {"role": "tool", "tool_call_id": "c2", "content": "4"},
            {"role": "user", "content": [{"type": "text", "text": "Images returned by the tool call above:"}]}]
    tools = [{"type": "function", "function": {"name": "zoom", "description": "d", "parameters": {"type": "object"}}}]
    payload = await provider.build_payload(ChatRequest(messages=msgs, tools=tools, params={"stop": "END"}))
    await provider.close()
    roles = [m["role"] for m in payload["messages"]]
    assert roles == ["user", "assistant", "user"]
    last = payload["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[0]["content"][1]["type"] == "image" and last[1]["tool_use_id"] == "c2"
    assert payload["messages"][1]["content"][1]["input"] == {}  # arguments that were not JSON
    assert payload["system"][0]["text"] == "be brief" and payload["stop_sequences"] == ["END"]
    marks = sum("cache_control" in b for m in payload["messages"] for b in m["content"])
    assert marks + sum("cache_control" in b for b in payload["system"]) <= 4
    assert "cache_control" not in msgs[1]["content"][0]  # the trajectory itself is never mutated
