"""provider: gemini against a loopback generateContent API that validates like the real one."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from providers.base import ChatRequest, ProviderError
from providers.client import ModelClient, RetryPolicy
from providers.gemini import GeminiProvider, clean_schema
from providers.sim import SimModel
from providers.sim.spec import Faults
from tests.providers.native.native_support import demo_suite, native_sim, root, sweep

KEY = "AIza-loopback-0123456789"
PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a") + b"\x00" * 32).decode()


def _model(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "provider": "gemini", "model": "gemini-sim", "api_key_env": "FE_TEST_GEMINI_KEY", **kw}


async def test_tool_loop_with_images_after_function_responses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_GEMINI_KEY", KEY)
    async with native_sim([SimModel("gemini-sim", policy="tools")], {"gemini": KEY}) as sim:
        res, records = await sweep(tmp_path, {"models": [_model("gemini", base_url=root(sim))],
                                              "suites": [demo_suite(4)], "seeds": [0, 1]})
    assert res.ok == 8, [r["error"] for r in records]
    assert all(r["score"] == 1.0 for r in records)
    for r in records:
        tool_msgs = [m for m in r["trajectory"]["messages"] if m["role"] == "tool"]
        assert any(isinstance(m["content"], list) and any(p["type"] == "image" for p in m["content"]) for m in tool_msgs)
        assert r["usage"]["cache_read_tokens"] > 0  # implicit caching of the repeated prefix


async def test_thought_signatures_are_sent_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_GEMINI_KEY", KEY)
    async with native_sim([SimModel("gemini-sim", policy="tools")], {"gemini": KEY}) as sim:
        res, records = await sweep(tmp_path, {"models": [_model("gemini-think", base_url=root(sim), thinking_budget=512)],
                                              "suites": [demo_suite(2)], "seeds": [0]})
    assert res.ok == 2, [r["error"] for r in records]
    natives = [m["native"] for r in records for m in r["trajectory"]["messages"] if "native" in m]
    assert natives and all(any("thoughtSignature" in p for p in n["parts"]) for n in natives if
                           any("functionCall" in p for p in n["parts"]))


def _client(sim_root: str) -> ModelClient:
    return ModelClient("g", GeminiProvider("gemini-sim", base_url=sim_root, api_key_env="FE_TEST_GEMINI_KEY"),
                       retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05))


async def test_resource_exhausted_honours_the_retry_delay_it_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_GEMINI_KEY", KEY)
    model = SimModel("gemini-sim", policy="scripted", default_reply="ok",
                     faults=Faults(schedule=["429", "503"], retry_after_s=0.03))
    async with native_sim([model], {"gemini": KEY}) as sim:
        client = _client(root(sim))
        resp = await client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        await client.close()
    assert resp.content == "ok"
    assert client.stats.by_kind == {"rate_limit": 1, "transient": 1}
    assert client.stats.backoff_s >= 0.03  # the RetryInfo delay, not our 10 ms base


@pytest.mark.parametrize(("fault", "kind"), [("overflow", "context_overflow"), ("401", "auth"), ("400", "fatal")])
async def test_final_errors_are_classified(fault: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_GEMINI_KEY", KEY)
    async with native_sim([SimModel("gemini-sim", policy="scripted", faults=Faults(schedule=[fault]))],
                          {"gemini": KEY}) as sim:
        client = _client(root(sim))
        with pytest.raises(ProviderError) as err:
            await client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        await client.close()
    assert err.value.kind == kind


async def test_invalid_key_is_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_GEMINI_KEY", "AIza-wrong")
    async with native_sim([SimModel("gemini-sim", policy="scripted")], {"gemini": KEY}) as sim:
        client = _client(root(sim))
        with pytest.raises(ProviderError) as err:
            await client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        await client.close()
    assert err.value.kind == "auth"


async def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as s, s.post(url, data=orjson.dumps(body), headers={"x-goog-api-key": KEY}) as r:
        return r.status, await r.json()


def _call(name: str) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": {}}}


@pytest.mark.parametrize(("body", "needle"), [
    ({"contents": [{"role": "system", "parts": [{"text": "x"}]}]}, "valid role"),
    ({"contents": [{"role": "user", "parts": [{"text": "a"}]}, {"role": "user", "parts": [{"text": "b"}]}]}, "alternate"),
    ({"contents": [{"role": "user", "parts": [{"text": "a"}]}, {"role": "model", "parts": [_call("f"), _call("g")]},
                   {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "1"}}}]}]},
     "number of function response parts"),
    ({"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}]},
     "immediately after a function call"),
    ({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/jpeg", "data": PNG}}]}]}, "not valid"),
    ({"contents": [{"role": "user", "parts": [{"text": "a"}]}],
      "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "object", "additionalProperties": False}}]}]},
     "additionalProperties"),
    ({"contents": [{"role": "user", "parts": [{"text": "a"}]}], "seed": 3}, "Unknown name"),
])
async def test_the_loopback_api_rejects_what_the_real_one_rejects(body: dict[str, Any], needle: str) -> None:
    async with native_sim([SimModel("gemini-sim", policy="scripted")], {"gemini": KEY}) as sim:
        status, err = await _post(f"{root(sim)}/v1beta/models/gemini-sim:generateContent", body)
    assert status == 400 and err["error"]["status"] == "INVALID_ARGUMENT" and needle in err["error"]["message"]


async def test_translation_names_each_call_and_cleans_schemas() -> None:
    async def resolve(ref: str, profile: str) -> str:
        return f"data:image/png;base64,{PNG}"

    provider = GeminiProvider("gemini-x", api_key_env=None, api_key="k", image_resolver=resolve)
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"},
            {"role": "assistant", "content": "calling", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "zoom", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "calc", "arguments": '{"e": "1+1"}'}}]},
            {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "crop"},
                                                              {"type": "image", "image": "c" * 64}]},
            {"role": "tool", "tool_call_id": "b", "content": "2"}]
    tools = [{"type": "function", "function": {"name": "calc", "parameters": {
        "type": "object", "additionalProperties": False, "$schema": "x",
        "properties": {"e": {"type": "string", "additionalProperties": False}}}}}]
    payload = await provider.build_payload(ChatRequest(messages=msgs, tools=tools, params={"max_tokens": 9}, seed=4))
    await provider.close()
    parts = payload["contents"][-1]["parts"]
    assert [next(iter(p)) for p in parts] == ["functionResponse", "functionResponse", "inlineData"]
    assert [p["functionResponse"]["name"] for p in parts[:2]] == ["zoom", "calc"]
    assert payload["generationConfig"] == {"maxOutputTokens": 9, "seed": 4}
    assert payload["tools"][0]["functionDeclarations"][0]["parameters"] == clean_schema(tools[0]["function"]["parameters"])
    assert "additionalProperties" not in str(payload["tools"])
    assert payload["systemInstruction"] == {"parts": [{"text": "be brief"}]}


@pytest.mark.parametrize("call_ids", [True, False])
async def test_tool_loop_with_and_without_call_ids(call_ids: bool, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Current models set functionCall.id and the API refuses a response without it; older ones set none."""
    monkeypatch.setenv("FE_TEST_GEMINI_KEY", KEY)
    model = SimModel("gemini-sim", policy="tools", options={"call_ids": call_ids})
    async with native_sim([model], {"gemini": KEY}) as sim:
        res, records = await sweep(tmp_path, {"models": [_model("gemini", base_url=root(sim))],
                                              "suites": [demo_suite(2)], "seeds": [0]})
    assert res.ok == 2, [r["error"] for r in records]
    ids = [tc["id"] for r in records for m in r["trajectory"]["messages"] for tc in m.get("tool_calls") or []]
    assert ids and all(i.startswith("call_") if call_ids else i.startswith("gemini_call_") for i in ids)


def _id_call(name: str, cid: str | None) -> dict[str, Any]:
    return {"functionCall": {**({"id": cid} if cid else {}), "name": name, "args": {}}}


def _response(name: str, rid: str | None) -> dict[str, Any]:
    return {"functionResponse": {**({"id": rid} if rid else {}), "name": name, "response": {"output": "1"}}}


@pytest.mark.parametrize(("responses", "ok"), [
    ([_response("zoom", "c2"), _response("zoom", "c1")], True),   # matched by id, in any order
    ([_response("zoom", None), _response("zoom", None)], False),  # the ids dropped: the reported bug
    ([_response("zoom", "c1"), _response("zoom", "c9")], False),  # an id of no call
])
async def test_the_loopback_api_matches_function_responses_by_id(responses: list[dict[str, Any]], ok: bool) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "a"}]},
                         {"role": "model", "parts": [_id_call("zoom", "c1"), _id_call("zoom", "c2")]},
                         {"role": "user", "parts": responses}]}
    async with native_sim([SimModel("gemini-sim", policy="scripted")], {"gemini": KEY}) as sim:
        status, err = await _post(f"{root(sim)}/v1beta/models/gemini-sim:generateContent", body)
    if ok:
        assert status == 200, err
    else:
        assert status == 400 and err["error"]["status"] == "INVALID_ARGUMENT"
        assert "functionResponse ids" in err["error"]["message"] and "'c1'" in err["error"]["message"]


async def test_parallel_calls_of_one_tool_are_answered_by_id() -> None:
    """Two calls of the same function in one turn: each response carries its own call's id, and
    the loopback API (which checks ids) accepts the request we build."""
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "zoom", "arguments": '{"i": 1}'}},
                {"id": "call_b", "type": "function", "function": {"name": "zoom", "arguments": '{"i": 2}'}},
                {"id": "gemini_call_2", "type": "function", "function": {"name": "calc", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_b", "content": "second"},
            {"role": "tool", "tool_call_id": "call_a", "content": "first"},
            {"role": "tool", "tool_call_id": "gemini_call_2", "content": "2"}]
    async with native_sim([SimModel("gemini-sim", policy="scripted", default_reply="done")], {"gemini": KEY}) as sim:
        provider = GeminiProvider("gemini-sim", base_url=root(sim), api_key_env=None, api_key=KEY)
        payload = await provider.build_payload(ChatRequest(messages=msgs))
        resp = await provider.chat(ChatRequest(messages=msgs))
        await provider.close()
    assert resp.content == "done"
    calls = [p["functionCall"] for p in payload["contents"][1]["parts"]]
    answers = [p["functionResponse"] for p in payload["contents"][2]["parts"]]
    assert [c.get("id") for c in calls] == ["call_a", "call_b", None]  # our own numbering is never sent
    assert [(a.get("id"), a["response"]["output"]) for a in answers] == [("call_b", "second"), ("call_a", "first"),
                                                                         (None, "2")]
