"""provider: openai-responses against a loopback Responses API that validates like the real one."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from fasteval.view.trajectory import messages_html
from providers.base import ChatRequest, ProviderError
from providers.client import ModelClient, RetryPolicy
from providers.http_json import openai_retry_after, reset_duration
from providers.openai_responses import OpenAIResponsesProvider
from providers.sim import SimModel
from providers.sim.spec import Faults
from tests.providers.native.native_support import demo_suite, native_sim, root, sweep

KEY = "sk-loopback-0123456789"
PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a") + b"\x00" * 32).decode()
JPEG_URL = "data:image/jpeg;base64," + base64.b64encode(b"\xff\xd8\xff\xe0" + b"\x00" * 32).decode()


def _model(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "provider": "openai-responses", "model": "o4-sim", "api_key_env": "FE_TEST_OPENAI_KEY", **kw}


async def test_reasoning_items_are_carried_across_tool_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback API refuses a function_call sent back without its reasoning item, so a tool
    loop with a zoomed image only completes when every round's items go back verbatim."""
    monkeypatch.setenv("FE_TEST_OPENAI_KEY", KEY)
    async with native_sim([SimModel("o4-sim", policy="tools")], {"openai": KEY}) as sim:
        res, records = await sweep(tmp_path, {
            "models": [_model("o4", base_url=f"{root(sim)}/v1", reasoning_effort="high",
                              params={"temperature": 0.0, "max_tokens": 4096})],
            "suites": [demo_suite(4)], "seeds": [0]})
    assert res.ok == 4, [r["error"] for r in records]
    assert all(r["score"] == 1.0 for r in records)
    for r in records:
        msgs = r["trajectory"]["messages"]
        zoom = next(m for m in msgs if m["role"] == "tool" and isinstance(m["content"], list))
        assert any(p["type"] == "image" for p in zoom["content"])  # the crop inside function_call_output
        natives = [m["native"] for m in msgs if m["role"] == "assistant"]
        assert natives and all(n["provider"] == "openai-responses" and n["summary"] for n in natives)
        assert all(n["items"][0]["type"] == "reasoning" and n["items"][0]["encrypted_content"] for n in natives)
        assert r["usage"]["cache_read_tokens"] > 0 and 0 < r["usage"]["reasoning_tokens"] < r["usage"]["completion_tokens"]
        # the viewer shows each round's reasoning summary, never the encrypted reasoning
        html = messages_html(r["trajectory"], lambda ref: None)
        assert html.count("reasoning summary") == len(natives) and natives[0]["summary"] in html
        assert natives[0]["items"][0]["encrypted_content"] not in html


async def test_api_responses_on_provider_openai_is_the_same_wire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_OPENAI_KEY", KEY)
    async with native_sim([SimModel("o4-sim", policy="tools")], {"openai": KEY}) as sim:
        res, records = await sweep(tmp_path, {
            "models": [{"name": "o4", "provider": "openai", "api": "responses", "model": "o4-sim",
                        "base_url": f"{root(sim)}/v1", "api_key_env": "FE_TEST_OPENAI_KEY"}],
            "suites": [demo_suite(1)], "seeds": [0]})
    assert res.ok == 1, [r["error"] for r in records]


async def test_the_sim_wire_runs_a_suite_offline(tmp_path: Path) -> None:
    res, records = await sweep(tmp_path, {
        "models": [{"name": "o4-sim", "provider": "sim", "policy": "tools", "wire": "openai-responses"}],
        "suites": [demo_suite(2)], "seeds": [0]})
    assert res.ok == 2, [r["error"] for r in records]


def _provider(sim_root: str, model: str = "o4-sim", **kw: Any) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(model, base_url=f"{sim_root}/v1", api_key_env=None, api_key=KEY, **kw)


def _client(provider: OpenAIResponsesProvider) -> ModelClient:
    return ModelClient("r", provider, retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05))


HI = ChatRequest(messages=[{"role": "user", "content": "hi"}])


@pytest.mark.parametrize(("fault", "finish"), [("length", "length"), ("content_filter", "refusal"),
                                                ("refusal", "refusal"), ("ok", "stop")])
async def test_incomplete_and_refused_outputs_map_to_terminations(fault: str, finish: str) -> None:
    model = SimModel("o4-sim", policy="scripted", default_reply="a long answer", faults=Faults(schedule=[fault]))
    async with native_sim([model], {"openai": KEY}) as sim:
        provider = _provider(root(sim))
        resp = await provider.chat(HI)
        await provider.close()
    assert resp.finish_reason == finish
    if fault == "refusal":
        assert resp.content == "I can't help with that."


async def test_a_small_output_limit_ends_as_max_tokens_on_the_record(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_TEST_OPENAI_KEY", KEY)
    async with native_sim([SimModel("o4-sim", policy="tools")], {"openai": KEY}) as sim:
        res, records = await sweep(tmp_path, {"models": [_model("o4", base_url=f"{root(sim)}/v1",
                                                                params={"max_tokens": 16})],
                                              "suites": [demo_suite(1)], "seeds": [0]})
    assert [r["trajectory"]["termination"] for r in records] == ["max_tokens"]


async def test_usage_counts_reasoning_tokens_once() -> None:
    """output_tokens already holds the reasoning tokens: completion_tokens (billed as output) is
    output_tokens, never output plus reasoning."""
    async with native_sim([SimModel("o4-sim", policy="scripted", default_reply="ok")], {"openai": KEY}) as sim:
        provider = _provider(root(sim), reasoning_effort="high")
        status, raw = await _post(f"{root(sim)}/v1/responses", await provider.build_payload(HI))
        resp = await provider.chat(HI)
        await provider.close()
    assert status == 200 and raw["usage"]["output_tokens_details"]["reasoning_tokens"] == 128
    assert resp.native is not None and resp.native["reasoning_tokens"] == resp.usage.reasoning_tokens == 128
    assert resp.usage.completion_tokens == raw["usage"]["output_tokens"]
    assert resp.usage.prompt_tokens == raw["usage"]["input_tokens"]

    from fasteval.core.pricing import Price, cost_usd
    price = Price(input=0.0, output=1.0)
    assert cost_usd({"completion_tokens": resp.usage.completion_tokens}, price) == resp.usage.completion_tokens / 1e6


async def test_sampling_parameters_follow_the_capability() -> None:
    """A reasoning model refuses temperature/top_p (the loopback API answers 400): not sent; a
    model marked ``sampling: true`` (reasoning: false on the sim) gets them."""
    models = [SimModel("o4-sim", policy="scripted", default_reply="ok"),
              SimModel("gpt-4.1-sim", policy="scripted", default_reply="ok", options={"reasoning": False})]
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], params={"temperature": 0.3, "top_p": 0.9},
                          seed=5)
    async with native_sim(models, {"openai": KEY}) as sim:
        reasoning, plain = _provider(root(sim)), _provider(root(sim), "gpt-4.1-sim")
        body = await reasoning.build_payload(request)
        assert "temperature" not in body and "seed" not in body and body["include"] == ["reasoning.encrypted_content"]
        assert (await reasoning.chat(request)).content == "ok"
        plain.capability_overrides = {"sampling": True, "thinking": False}
        body = await plain.build_payload(request)
        assert body["temperature"] == 0.3 and "reasoning" not in body and "seed" not in body
        assert (await plain.chat(request)).content == "ok"
        await reasoning.close()
        await plain.close()


async def test_rate_limits_wait_for_the_ratelimit_reset_header() -> None:
    model = SimModel("o4-sim", policy="scripted", default_reply="ok", faults=Faults(schedule=["429"], retry_after_s=0.04))
    async with native_sim([model], {"openai": KEY}) as sim:
        client = _client(_provider(root(sim)))
        resp = await client.chat(HI)
        await client.close()
    assert resp.content == "ok" and client.stats.by_kind == {"rate_limit": 1}
    assert client.stats.backoff_s >= 0.04  # x-ratelimit-reset-requests, not our 10 ms base


@pytest.mark.parametrize(("fault", "kind"), [("overflow", "context_overflow"), ("401", "auth"), ("400", "fatal")])
async def test_final_errors_are_classified(fault: str, kind: str) -> None:
    async with native_sim([SimModel("o4-sim", policy="scripted", faults=Faults(schedule=[fault]))],
                          {"openai": KEY}) as sim:
        client = _client(_provider(root(sim)))
        with pytest.raises(ProviderError) as err:
            await client.chat(HI)
        await client.close()
    assert err.value.kind == kind


@pytest.mark.parametrize(("status", "body", "kind"), [
    (429, {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                     "code": "insufficient_quota"}}, "fatal"),
    (429, {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}, "rate_limit"),
    (400, {"error": {"message": "Invalid image.", "type": "invalid_request_error", "code": "invalid_image_format"}},
     "bad_input"),
    (400, {"error": {"message": "Your input exceeds the context window of this model.", "code": None}},
     "context_overflow"),
    (403, {"error": {"message": "Country not supported", "code": "unsupported_country_region_territory"}}, "auth"),
    (500, {"error": {"message": "The server had an error", "type": "server_error", "code": None}}, "transient"),
    (503, {"error": {"message": "Slow down", "type": "server_error", "code": "slow_down"}}, "transient"),
    (404, {"error": {"message": "The model does not exist", "code": "model_not_found"}}, "fatal"),
])
def test_every_documented_error_has_a_kind(status: int, body: dict[str, Any], kind: str) -> None:
    from providers.openai_responses import classify_responses_error

    assert classify_responses_error(status, orjson.dumps(body), {}).kind == kind


def test_a_failed_response_is_classified_by_its_error_code() -> None:
    from providers.openai_responses import parse_responses_response

    body = {"id": "resp_1", "object": "response", "status": "failed", "output": [],
            "error": {"code": "server_error", "message": "boom"}}
    with pytest.raises(ProviderError) as err:
        parse_responses_response(orjson.dumps(body))
    assert err.value.kind == "transient"


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after": "2"}, 2.0), ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s",
      "x-ratelimit-remaining-tokens": "10", "x-ratelimit-reset-tokens": "6m0s"}, 1.0),
    ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m30.5s",
      "x-ratelimit-reset-requests": "20ms"}, 90.5),
    ({"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "2s"}, 2.0),
    ({"x-ratelimit-reset-requests": "soon"}, None), ({}, None),
])
def test_retry_after_headers(headers: dict[str, str], seconds: float | None) -> None:
    assert openai_retry_after(headers) == seconds
    assert reset_duration("1h2m3.5s") == 3723.5


async def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as s, \
            s.post(url, data=orjson.dumps(body), headers={"authorization": f"Bearer {KEY}"}) as r:
        return r.status, await r.json()


def _user(text: str = "a") -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _fc(cid: str, fid: str | None = None) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "zoom", "arguments": "{}", **({"id": fid} if fid else {})}


TOOL = {"type": "function", "name": "zoom", "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}


@pytest.mark.parametrize(("body", "needle"), [
    ({"input": [_user(), _fc("c1", "fc_abc_0"), {"type": "function_call_output", "call_id": "c1", "output": "1"}]},
     "without its required 'reasoning' item: 'rs_abc'"),
    ({"input": [_user(), {"type": "function_call_output", "call_id": "c9", "output": "1"}]},
     "No tool call found for function call output with call_id c9"),
    ({"input": [_user(), _fc("c1"), {"type": "function_call_output", "output": "1"}]}, "'input[2].call_id'"),
    ({"input": [_user(), _fc("c1")]}, "No tool output found for function call c1"),
    ({"input": [_user(), {"type": "message", "role": "assistant",
                          "content": [{"type": "input_image", "image_url": JPEG_URL}]}]},
     "Supported values are: 'output_text' and 'refusal'"),
    ({"input": [_user(), {"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}]},
     "Invalid value: 'input_text'"),
    ({"input": [_user()], "instructions": [{"type": "input_image", "image_url": JPEG_URL}]},
     "Invalid type for 'instructions'"),
    ({"input": [_user()], "seed": 3}, "Unknown parameter: 'seed'"),
    ({"input": [_user()], "temperature": 0.2}, "'temperature' is not supported with this model"),
    ({"input": [_user()], "tools": [TOOL]}, "'additionalProperties' is required to be supplied"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": f"data:image/jpeg;base64,{PNG}"}]}]},
     "does not represent a valid image"),
    ({"input": [_user(), {"type": "reasoning", "id": "rs_1", "summary": []}, _fc("c1")], "store": False},
     "Items are not persisted when `store` is set to false"),
])
async def test_the_loopback_api_rejects_what_the_real_one_rejects(body: dict[str, Any], needle: str) -> None:
    async with native_sim([SimModel("o4-sim", policy="scripted")], {"openai": KEY}) as sim:
        status, err = await _post(f"{root(sim)}/v1/responses", {"model": "o4-sim", **body})
    assert status in (400, 404) and needle in err["error"]["message"], err
    assert set(err["error"]) == {"message", "type", "param", "code"}


async def test_explicit_strict_false_and_images_in_function_call_output_are_accepted() -> None:
    body = {"model": "o4-sim", "tools": [{**TOOL, "strict": False}],
            "input": [_user(), _fc("c1"), {"type": "function_call_output", "call_id": "c1", "output": [
                {"type": "input_text", "text": "crop"}, {"type": "input_image", "image_url": JPEG_URL}]}]}
    async with native_sim([SimModel("o4-sim", policy="scripted", default_reply="seen")], {"openai": KEY}) as sim:
        status, resp = await _post(f"{root(sim)}/v1/responses", body)
    assert status == 200 and resp["output"][-1]["content"][0]["text"] == "seen"


async def test_translation_of_a_trajectory() -> None:
    async def resolve(ref: str, profile: str) -> str:
        return JPEG_URL

    provider = OpenAIResponsesProvider("o3", api_key_env=None, api_key="k", image_resolver=resolve)
    msgs = [{"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "image", "image": "i" * 64}, {"type": "text", "text": "go"}]},
            {"role": "assistant", "content": "calling", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "zoom", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "crop"},
                                                              {"type": "image", "image": "c" * 64}]},
            {"role": "assistant", "content": "done"}, {"role": "user", "content": "again"}]
    tools = [{"type": "function", "function": {"name": "zoom", "description": "Zoom.", "parameters": TOOL["parameters"]}}]
    payload = await provider.build_payload(ChatRequest(messages=msgs, tools=tools, params={"max_tokens": 9}))
    await provider.close()
    assert payload["instructions"] == "be brief" and payload["store"] is False
    assert [i.get("type") for i in payload["input"]] == ["message", "message", "function_call", "function_call_output",
                                                         "message", "message"]
    assert payload["input"][1] == {"type": "message", "role": "assistant", "content": "calling"}
    assert payload["input"][3]["output"][1] == {"type": "input_image", "image_url": JPEG_URL, "detail": "auto"}
    assert payload["tools"] == [{"type": "function", "name": "zoom", "parameters": TOOL["parameters"],
                                 "strict": False, "description": "Zoom."}]
    assert payload["max_output_tokens"] == 9 and payload["reasoning"] == {"summary": "auto"}


async def test_an_unverified_organisation_runs_on_without_reasoning_summaries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """OpenAI refuses ``reasoning.summary`` (400, param reasoning.summary) for an organisation that is
    not verified. Our default asks for summaries, so such a user's whole sweep would fail: the
    request is sent again without one, the run goes on without them and says so once."""
    monkeypatch.setenv("FE_TEST_OPENAI_KEY", KEY)
    model = SimModel("o4-sim", policy="tools", options={"summaries": False})
    async with native_sim([model], {"openai": KEY}) as sim:
        status, raw = await _post(f"{root(sim)}/v1/responses", await _provider(root(sim)).build_payload(HI))
        assert status == 400 and raw["error"]["param"] == "reasoning.summary"  # what the real one answers
        with caplog.at_level("WARNING", logger="providers.openai_responses"):
            res, records = await sweep(tmp_path, {
                "models": [_model("o4", base_url=f"{root(sim)}/v1", reasoning_effort="high")],
                "suites": [demo_suite(3)], "seeds": [0]})
    assert res.ok == 3, [r["error"] for r in records]
    natives = [m["native"] for r in records for m in r["trajectory"]["messages"] if m["role"] == "assistant"]
    assert natives and all(n["summary"] is None for n in natives)
    warnings = [r for r in caplog.records if "reasoning summaries" in r.getMessage()]
    assert len(warnings) == 1 and "not verified" in warnings[0].getMessage()


async def test_a_model_that_reasons_under_an_unknown_id_is_learned_not_fatal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Neither the id (``house-model``) nor ``reasoning_effort`` says it reasons, so the first rounds
    do not ask for encrypted reasoning, and ``store: false`` cannot send those items back (the API
    answers 404). They go back without them, and the model is asked for them from then on."""
    monkeypatch.setenv("FE_TEST_OPENAI_KEY", KEY)
    async with native_sim([SimModel("house-model", policy="tools")], {"openai": KEY}) as sim:
        with caplog.at_level("WARNING", logger="providers.openai_responses"):
            res, records = await sweep(tmp_path, {
                "models": [{**_model("m", base_url=f"{root(sim)}/v1"), "model": "house-model"}],
                "suites": [demo_suite(3)], "seeds": [0]})
    assert res.ok == 3, [r["error"] for r in records]
    assert len([r for r in caplog.records if "reasons but its id" in r.getMessage()]) == 1
    natives = [m["native"] for r in records for m in r["trajectory"]["messages"] if m["role"] == "assistant"]
    assert any(i.get("encrypted_content") for n in natives for i in n["items"] if i["type"] == "reasoning")
