"""``historical_weather`` (VisualToolBench).

The reference geocodes with OpenWeatherMap and then returns the **current** weather with a note
that history needs a paid plan, whatever date is asked. ``reference`` reproduces exactly that
(so published numbers can be reproduced); ``fixed`` answers the question asked, from the
Open-Meteo historical archive (ERA5 reanalysis, daily values from 1940 to about five days ago)
after Open-Meteo geocoding. Both validate the date first.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any, ClassVar

import orjson

from fasteval.tools.base import Tool, ToolContext, ToolResult, register_tool
from fasteval.tools.retrieval.transport import (
    MissingKey,
    RetrySettings,
    UpstreamError,
    api_key,
    http_session,
    redact,
    request_json,
)

OPENWEATHER_URL = "https://api.openweathermap.org"
GEOCODING_URL = "https://geocoding-api.open-meteo.com"
ARCHIVE_URL = "https://archive-api.open-meteo.com"
REFERENCE_NOTE = "Current weather data (historical requires paid plan)"
ARCHIVE_START = date(1940, 1, 1)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_COORDS = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*$")
DAILY = ("weather_code", "temperature_2m_max", "temperature_2m_min", "temperature_2m_mean", "precipitation_sum",
         "rain_sum", "snowfall_sum", "wind_speed_10m_max")

WMO_CODES: dict[int, str] = {
    0: "clear sky", 1: "mainly clear", 2: "partly cloudy", 3: "overcast", 45: "fog", 48: "depositing rime fog",
    51: "light drizzle", 53: "moderate drizzle", 55: "dense drizzle", 56: "light freezing drizzle",
    57: "dense freezing drizzle", 61: "slight rain", 63: "moderate rain", 65: "heavy rain",
    66: "light freezing rain", 67: "heavy freezing rain", 71: "slight snow fall", 73: "moderate snow fall",
    75: "heavy snow fall", 77: "snow grains", 80: "slight rain showers", 81: "moderate rain showers",
    82: "violent rain showers", 85: "slight snow showers", 86: "heavy snow showers", 95: "thunderstorm",
    96: "thunderstorm with slight hail", 99: "thunderstorm with heavy hail",
}


def parse_date(value: Any, *, today: date | None = None, historical: bool = True) -> date:
    """A real calendar day written YYYY-MM-DD; for the archive, between 1940-01-01 and today."""
    if not isinstance(value, str) or not _DATE.match(value.strip()):
        raise ValueError(f"date must be written YYYY-MM-DD, got {value!r}")
    try:
        day = date.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{value!r} is not a calendar date") from None
    if historical:
        today = today or date.today()
        if day > today:
            raise ValueError(f"{day.isoformat()} is in the future; historical weather needs a past date")
        if day < ARCHIVE_START:
            raise ValueError(f"the archive starts on {ARCHIVE_START.isoformat()}")
    return day


def _num(value: Any, unit: str) -> str | None:
    return None if value is None else f"{float(value):.1f}{unit}"


@register_tool
class HistoricalWeather(Tool):
    """Weather on a past day at a place."""

    name: ClassVar[str] = "historical_weather"
    description: ClassVar[str] = ("Get historical weather data for a specific location and date. "
                                  "Useful for analyzing past weather patterns or events.")
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "location": {"type": "string",
                         "description": "City name or coordinates (e.g., 'New York, NY' or '40.7128,-74.0060')"},
            "date": {"type": "string", "description": "Date in YYYY-MM-DD format"},
        },
        "required": ["location", "date"],
    }
    requires: ClassVar[tuple[str, ...]] = ("http",)
    limiter: ClassVar[str | None] = "historical_weather"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        location, day_arg = args.get("location"), args.get("date")
        reference = ctx.fidelity == "reference"
        extra: dict[str, Any] = {"provider": "openweathermap" if reference else "open-meteo-archive",
                                 "location": location, "date": day_arg}
        secrets: list[str] = []

        def fail(message: str) -> ToolResult:
            body = {"location": location, "date": day_arg, "status": "error", "error": redact(message, secrets)}
            return ToolResult.fail(orjson.dumps(body).decode(), **extra)

        if not isinstance(location, str) or not location.strip():
            return fail("location must be a non-empty string (a city name or 'lat,lon')")
        try:
            day = parse_date(day_arg, historical=not reference)
        except ValueError as e:
            return fail(str(e))
        retry = RetrySettings.from_options(self.options)
        timeout_s = float(self.options.get("timeout_s", 10.0))
        try:
            if reference:
                key = api_key(self.options, "OPENWEATHER_API_KEY")
                secrets.append(key)
                out = await self._current(ctx, location, day.isoformat(), key, retry, timeout_s)
            else:
                out = await self._archive(ctx, location.strip(), day, retry, timeout_s)
        except (MissingKey, UpstreamError, LookupError) as e:
            return fail(str(e))
        extra["coordinates"] = out.get("coordinates")
        return ToolResult(status="ok", output=orjson.dumps(out).decode(), extra=extra)

    async def _current(self, ctx: ToolContext, location: str, day: str, key: str, retry: RetrySettings,
                       timeout_s: float) -> dict[str, Any]:
        """The reference: OpenWeatherMap geocoding, then today's weather with its note."""
        base = str(self.options.get("openweather_url") or OPENWEATHER_URL).rstrip("/")
        async with http_session(ctx) as session:
            geo = await request_json(session, "GET", f"{base}/geo/1.0/direct",
                                     params={"q": location, "limit": 1, "appid": key}, timeout_s=timeout_s, retry=retry)
            if not isinstance(geo, list) or not geo:
                raise LookupError("Location not found")
            lat, lon = geo[0]["lat"], geo[0]["lon"]
            w = await request_json(session, "GET", f"{base}/data/2.5/weather",
                                   params={"lat": lat, "lon": lon, "appid": key, "units": "metric"},
                                   timeout_s=timeout_s, retry=retry)
        try:
            main = w["main"]
            return {
                "location": location, "date": day, "coordinates": f"{lat}, {lon}",
                "temperature": {"current": f"{main['temp']:.1f}°C", "feels_like": f"{main['feels_like']:.1f}°C",
                                "min": f"{main['temp_min']:.1f}°C", "max": f"{main['temp_max']:.1f}°C"},
                "conditions": w["weather"][0]["description"], "humidity": f"{main['humidity']}%",
                "wind_speed": f"{w['wind']['speed']} m/s", "pressure": f"{main['pressure']} hPa",
                "status": "success", "note": REFERENCE_NOTE,
            }
        except (KeyError, IndexError, TypeError, ValueError):
            raise UpstreamError("bad_response", "OpenWeatherMap answered without the expected fields") from None

    async def _archive(self, ctx: ToolContext, location: str, day: date, retry: RetrySettings,
                       timeout_s: float) -> dict[str, Any]:
        """Open-Meteo: geocode (unless given 'lat,lon'), then that day's values from the archive."""
        geo_base = str(self.options.get("geocoding_url") or GEOCODING_URL).rstrip("/")
        archive_base = str(self.options.get("archive_url") or ARCHIVE_URL).rstrip("/")
        async with http_session(ctx) as session:
            coords = _COORDS.match(location)
            if coords:
                lat, lon, resolved = float(coords.group(1)), float(coords.group(2)), location
            else:
                # Open-Meteo matches a place name, not "City, Region": search by the first part.
                name = location.split(",")[0].strip()
                geo = await request_json(session, "GET", f"{geo_base}/v1/search",
                                         params={"name": name, "count": 1, "language": "en", "format": "json"},
                                         timeout_s=timeout_s, retry=retry)
                hits = geo.get("results") if isinstance(geo, dict) else None
                if not hits:
                    raise LookupError(f"Location not found: {location!r}")
                hit = hits[0]
                lat, lon = float(hit["latitude"]), float(hit["longitude"])
                resolved = ", ".join(str(p) for p in (hit.get("name"), hit.get("admin1"), hit.get("country")) if p)
            data = await request_json(session, "GET", f"{archive_base}/v1/archive", params={
                "latitude": lat, "longitude": lon, "start_date": day.isoformat(), "end_date": day.isoformat(),
                "daily": ",".join(DAILY), "timezone": "auto", "wind_speed_unit": "ms"},
                timeout_s=timeout_s, retry=retry)
        daily = data.get("daily") if isinstance(data, dict) else None
        if not isinstance(daily, dict):
            raise UpstreamError("bad_response", "the archive answered without daily values")
        values = {k: (daily.get(k) or [None])[0] for k in DAILY}
        if values["temperature_2m_max"] is None:
            raise LookupError(f"no archived data for {day.isoformat()} yet (the archive lags about five days)")
        code = values["weather_code"]
        return {
            "location": location, "resolved_location": resolved, "date": day.isoformat(),
            "coordinates": f"{lat}, {lon}",
            "temperature": {"max": _num(values["temperature_2m_max"], "°C"),
                            "min": _num(values["temperature_2m_min"], "°C"),
                            "mean": _num(values["temperature_2m_mean"], "°C")},
            "conditions": WMO_CODES.get(int(code), f"WMO code {code}") if code is not None else None,
            "precipitation": _num(values["precipitation_sum"], " mm"),
            "rain": _num(values["rain_sum"], " mm"), "snowfall": _num(values["snowfall_sum"], " cm"),
            "wind_speed_max": _num(values["wind_speed_10m_max"], " m/s"),
            "status": "success", "source": "Open-Meteo historical weather archive (ERA5), daily values",
        }
