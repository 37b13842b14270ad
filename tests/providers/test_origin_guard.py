"""Keys and request bodies never leave the configured origin: a 302/307 or a ``results_url``
pointing elsewhere is refused, unsent. Two real loopback servers on different ports."""

from __future__ import annotations

import pytest
from aiohttp import web

from providers.anthropic import AnthropicProvider
from providers.base import ChatRequest, ProviderError
from providers.batch.anthropic import AnthropicBatchWire
from providers.batch.base import BatchInfo
from providers.batch.gemini import GeminiBatchWire
from providers.batch.openai import OpenAIBatchWire
from providers.gemini import GeminiProvider
from providers.openai_compat import OpenAICompatProvider
from tests.reliability.loopback import LoopbackServer

KEY = "sk-origin-test-0123456789abcdef"
HI = ChatRequest(messages=[{"role": "user", "content": "a private prompt"}])


class Elsewhere(LoopbackServer):
    """Another origin: records every request that reaches it (it must see none)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict[str, str], bytes]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.path, dict(request.headers), await request.read()))
        return web.json_response({"id": "x", "name": "x", "content": [], "candidates": []})


class Redirecting(LoopbackServer):
    """The configured origin: answers every request with ``status`` to the same path on ``target``,
    except paths under /same/, which redirect within this origin to /ok."""

    def __init__(self, target: Elsewhere, status: int) -> None:
        super().__init__()
        self.target, self.status = target, status
        self.ok_hits = 0

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        if request.path == "/ok":
            self.ok_hits += 1
            return web.Response(body=b'{"custom_id":"a","result":{"type":"canceled"}}\n')
        where = f"{self.url}/ok" if request.path.startswith("/same/") else f"{self.target.url}{request.path_qs}"
        return web.Response(status=self.status, headers={"Location": where})


@pytest.fixture
async def servers(request: pytest.FixtureRequest) -> tuple[Redirecting, Elsewhere]:
    other = Elsewhere()
    await other.start()
    ours = Redirecting(other, int(getattr(request, "param", 307)))
    await ours.start()
    yield ours, other  # type: ignore[misc]
    await ours.stop()
    await other.stop()


def _providers(base: str) -> list[AnthropicProvider | GeminiProvider | OpenAICompatProvider]:
    return [AnthropicProvider("claude", base_url=base, api_key_env="FE_ORIGIN_KEY"),
            GeminiProvider("gemini", base_url=base, api_key_env="FE_ORIGIN_KEY"),
            OpenAICompatProvider(f"{base}/v1", "gpt", api_key_env="FE_ORIGIN_KEY")]


@pytest.mark.parametrize("servers", [302, 307, 308], indirect=True)
async def test_interactive_requests_do_not_follow_a_redirect_to_another_origin(
        servers: tuple[Redirecting, Elsewhere], monkeypatch: pytest.MonkeyPatch) -> None:
    ours, other = servers
    monkeypatch.setenv("FE_ORIGIN_KEY", KEY)
    for provider in _providers(ours.url):
        try:
            with pytest.raises(ProviderError) as err:
                await provider.chat(HI)
        finally:
            await provider.close()
        assert err.value.kind == "fatal" and "not the configured origin" in str(err.value), provider
        assert KEY not in str(err.value)
    assert other.seen == []  # neither the key nor the prompt reached it


async def test_batch_calls_and_a_foreign_results_url_stay_on_our_origin(
        servers: tuple[Redirecting, Elsewhere], monkeypatch: pytest.MonkeyPatch) -> None:
    ours, other = servers
    monkeypatch.setenv("FE_ORIGIN_KEY", KEY)
    anthropic, gemini, openai = _providers(ours.url)
    wires = [AnthropicBatchWire(anthropic), GeminiBatchWire(gemini), OpenAIBatchWire(openai)]  # type: ignore[arg-type]
    try:
        for wire in wires:
            with pytest.raises(ProviderError, match="not the configured origin"):
                await wire.create("fe1local", [wire.line("a", b'{"x":1}')], file_id=None, on_file=_no_file)
            with pytest.raises(ProviderError, match="not the configured origin"):
                await wire.retrieve("batches/b1" if isinstance(wire, GeminiBatchWire) else "batch_1")
        # A results_url the batch API hands back on another origin is never fetched with the key.
        info = BatchInfo(id="msgbatch_1", state="ended", status="ended", output_ref=f"{other.url}/results")
        with pytest.raises(ProviderError, match="not the configured origin"):
            await wires[0].results(info, ["a"])
    finally:
        for wire in wires:
            await wire.close()
    assert other.seen == []


async def test_a_redirect_within_the_origin_is_still_followed(
        servers: tuple[Redirecting, Elsewhere], monkeypatch: pytest.MonkeyPatch) -> None:
    ours, other = servers
    monkeypatch.setenv("FE_ORIGIN_KEY", KEY)
    wire = AnthropicBatchWire(AnthropicProvider("claude", base_url=ours.url, api_key_env="FE_ORIGIN_KEY"))
    try:
        info = BatchInfo(id="msgbatch_1", state="ended", status="ended", output_ref=f"{ours.url}/same/results")
        lines = await wire.results(info, ["a"])
    finally:
        await wire.close()
    assert ours.ok_hits == 1 and [x.custom_id for x in lines] == ["a"] and other.seen == []


async def _no_file(file_id: str) -> None:
    raise AssertionError("no upload may land anywhere")


async def test_ids_from_a_server_or_a_journal_never_steer_a_keyed_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``output_file_id`` of ``../../../evil?x=`` (or such a batch id) is refused, nothing sent."""
    ours = Elsewhere()
    await ours.start()
    monkeypatch.setenv("FE_ORIGIN_KEY", KEY)
    anthropic, gemini, openai = _providers(ours.url)
    wires = [AnthropicBatchWire(anthropic), GeminiBatchWire(gemini), OpenAIBatchWire(openai)]  # type: ignore[arg-type]
    try:
        for wire in wires:
            for bad in ("../../../evil?x=", "batch_1/../../files", "batches/../evil", "a%2F..%2Fb"):
                with pytest.raises(ProviderError, match="not"):
                    await wire.retrieve(bad)
                with pytest.raises(ProviderError, match="not"):
                    await wire.cancel(bad)
        with pytest.raises(ProviderError, match="is not an id we put into a URL"):
            await wires[2].results(BatchInfo(id="batch_1", state="ended", status="completed",
                                             output_ref="../../../evil?x="), ["a"])
    finally:
        for wire in wires:
            await wire.close()
        await ours.stop()
    assert ours.seen == []
