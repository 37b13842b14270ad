"""The loopback hub (tests/suites/hub/hub_server.py) for every suite test that downloads.

``fake_hub`` runs a FakeHub on its own event loop thread, so synchronous code under test (``data
fetch``, a suite's loader) and async tests alike can talk to it, and points HF_ENDPOINT at it.
Every test starts with the hub's other variables unset: no test reaches the real hub.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("hub_server", Path(__file__).parent / "hub" / "hub_server.py")
assert _spec is not None and _spec.loader is not None
hub_server = importlib.util.module_from_spec(_spec)
sys.modules["hub_server"] = hub_server
_spec.loader.exec_module(hub_server)


@pytest.fixture(autouse=True)
def _no_real_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_ENDPOINT", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: a test that forgets the fake fails fast


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[hub_server.FakeHub]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    hub = hub_server.FakeHub(token="hf_test_token")
    asyncio.run_coroutine_threadsafe(hub.__aenter__(), loop).result(10)
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    try:
        yield hub
    finally:
        asyncio.run_coroutine_threadsafe(hub.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
