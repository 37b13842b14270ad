"""historical_weather: Open-Meteo archive in fixed, OpenWeatherMap current weather in reference."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import orjson
import pytest

from fasteval.tools.base import ToolContext, make_tool
from fasteval.tools.retrieval.weather import REFERENCE_NOTE, parse_date
from tests.tools.retrieval.conftest import KEYS
from tests.tools.retrieval.retrieval_upstream import Upstream


def _tool(upstream: Upstream, **opts: Any) -> Any:
    return make_tool("historical_weather", geocoding_url=f"{upstream.url}/geo", archive_url=f"{upstream.url}/archive",
                     openweather_url=f"{upstream.url}/owm", **opts)


async def test_fixed_returns_the_archived_day(upstream: Upstream, make_ctx: Callable[..., ToolContext]) -> None:
    res = await _tool(upstream).run({"location": "Paris, France", "date": "2021-06-14"}, make_ctx("fixed"))
    assert res.status == "ok"
    out = orjson.loads(res.output)
    assert out["date"] == "2021-06-14" and out["resolved_location"] == "Paris, Île-de-France, France"
    assert out["temperature"] == {"max": "21.4°C", "min": "12.1°C", "mean": "16.7°C"}
    assert out["conditions"] == "moderate rain" and out["precipitation"] == "8.2 mm"
    assert "note" not in out and res.extra["provider"] == "open-meteo-archive"
    archive = next(s for s in upstream.seen if s["route"] == "archive")["query"]
    assert archive["start_date"] == archive["end_date"] == "2021-06-14" and archive["latitude"] == "48.85"
    assert next(s for s in upstream.seen if s["route"] == "geocode")["query"]["name"] == "Paris"


async def test_coordinates_skip_geocoding_and_unknown_places_fail(upstream: Upstream,
                                                                  make_ctx: Callable[..., ToolContext]) -> None:
    res = await _tool(upstream).run({"location": "40.71,-74.0", "date": "2020-01-01"}, make_ctx("fixed"))
    assert res.status == "ok" and upstream.hits["geocode"] == 0 and res.extra["coordinates"] == "40.71, -74.0"
    res = await _tool(upstream).run({"location": "Nowhere", "date": "2020-01-01"}, make_ctx("fixed"))
    assert res.status == "error" and "Location not found" in orjson.loads(res.output)["error"]


@pytest.mark.parametrize(("value", "message"), [
    ("14/06/2021", "YYYY-MM-DD"), ("2021-02-30", "not a calendar date"), ("2999-01-01", "in the future"),
    ("1900-01-01", "archive starts"), (None, "YYYY-MM-DD")])
async def test_dates_are_validated_before_any_request(value: Any, message: str, upstream: Upstream,
                                                      make_ctx: Callable[..., ToolContext]) -> None:
    res = await _tool(upstream).run({"location": "Paris", "date": value}, make_ctx("fixed"))
    assert res.status == "error" and message in orjson.loads(res.output)["error"] and not upstream.hits


def test_parse_date_accepts_today_and_past() -> None:
    assert parse_date("2024-02-29", today=date(2024, 3, 1)) == date(2024, 2, 29)


async def test_reference_returns_current_weather_with_its_note(upstream: Upstream,
                                                               make_ctx: Callable[..., ToolContext]) -> None:
    res = await _tool(upstream).run({"location": "London", "date": "1999-12-31"}, make_ctx("reference"))
    out = orjson.loads(res.output)
    assert res.status == "ok" and out["note"] == REFERENCE_NOTE and out["date"] == "1999-12-31"
    assert out["temperature"]["current"] == "14.2°C" and out["wind_speed"] == "4.1 m/s"
    assert out["conditions"] == "light rain" and out["humidity"] == "71%"
    assert upstream.seen[0]["query"]["appid"] == KEYS["OPENWEATHER_API_KEY"]
    assert KEYS["OPENWEATHER_API_KEY"] not in res.output + str(res.extra)


async def test_reference_key_handling(upstream: Upstream, make_ctx: Callable[..., ToolContext],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    upstream.fail_next("owm_geo", 401, body=f"Invalid API key {KEYS['OPENWEATHER_API_KEY']}")
    res = await _tool(upstream).run({"location": "London", "date": "2020-01-01"}, make_ctx("reference"))
    assert res.status == "error" and "HTTP 401" in res.output and KEYS["OPENWEATHER_API_KEY"] not in res.output
    monkeypatch.delenv("OPENWEATHER_API_KEY")
    res = await _tool(upstream).run({"location": "London", "date": "2020-01-01"}, make_ctx("reference"))
    assert res.status == "error" and "OPENWEATHER_API_KEY" in res.output and upstream.hits["owm_geo"] == 1
