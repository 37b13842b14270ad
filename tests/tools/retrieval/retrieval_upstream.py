"""A loopback server playing Serper, SerpAPI, web pages, Open-Meteo and OpenWeatherMap.

It counts every request per route and can be told to fail the next requests on a route
(``fail_next``), so tests can check retries, Retry-After, caching and key handling offline.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from aiohttp import web

ARTICLE = ("<p>The Lighthouse of Alexandria was built in the third century BC on the island of Pharos. "
           "It stood more than one hundred metres tall and guided ships into the harbour for centuries.</p>"
           "<p>Earthquakes between 956 and 1323 damaged it, and its last stones were used for a fortress.</p>")
PAGE = ("<html><head><title>Pharos lighthouse</title><script>var tracking = 'SCRIPTJUNK';</script></head><body>"
        "<header><nav><a href='/'>Home NAVJUNK</a></nav></header><article><h1>Pharos</h1>" + ARTICLE + "</article>"
        "<aside>Related: ASIDEJUNK</aside><footer>Copyright FOOTJUNK</footer></body></html>")


class Upstream:
    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.seen: list[dict[str, Any]] = []
        self.failures: dict[str, list[tuple[int, dict[str, str], str]]] = {}
        self.hang: set[str] = set()
        self.organic = [{"title": f"Result {i}", "link": f"PAGES/pages/p{i}", "snippet": f"snippet {i}",
                         "displayed_link": f"site{i}.example"} for i in range(1, 6)]
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, route: str, status: int, *, headers: dict[str, str] | None = None, body: str = "",
                  times: int = 1) -> None:
        self.failures.setdefault(route, []).extend([(status, headers or {}, body)] * times)

    def results(self) -> list[dict[str, str]]:
        return [{k: v.replace("PAGES", self.url) for k, v in r.items()} for r in self.organic]

    async def start(self) -> Upstream:
        app = web.Application()
        app.router.add_post("/serper/search", self.serper)
        app.router.add_get("/serpapi/search", self.serpapi)
        app.router.add_get("/pages/{name}", self.page)
        app.router.add_get("/geo/v1/search", self.geocode)
        app.router.add_get("/archive/v1/archive", self.archive)
        app.router.add_get("/owm/geo/1.0/direct", self.owm_geo)
        app.router.add_get("/owm/data/2.5/weather", self.owm_weather)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _enter(self, route: str, request: web.Request) -> web.Response | None:
        self.hits[route] += 1
        self.seen.append({"route": route, "query": dict(request.query), "headers": dict(request.headers)})
        if route in self.hang:
            await self._release.wait()  # until stop(): a hung upstream, without a wall-clock wait
        queue = self.failures.get(route)
        if queue:
            status, headers, body = queue.pop(0)
            return web.Response(status=status, headers=headers, text=body)
        return None

    async def serper(self, request: web.Request) -> web.Response:
        if (early := await self._enter("serper", request)) is not None:
            return early
        body = await request.json()
        self.seen[-1]["body"] = body
        return web.json_response({"searchParameters": {"q": body["q"]},
                                  "organic": [{"title": r["title"], "link": r["link"], "snippet": r["snippet"]}
                                              for r in self.results()]})

    async def serpapi(self, request: web.Request) -> web.Response:
        if (early := await self._enter("serpapi", request)) is not None:
            return early
        num = int(request.query.get("num", 10))
        return web.json_response({"organic_results": self.results()[:num],
                                  "search_information": {"total_results": 12345}})

    async def page(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if (early := await self._enter(f"page:{name}", request)) is not None:
            return early
        if name.startswith("p") and name[1:].isdigit():
            return web.Response(text=PAGE.replace("Pharos", f"Pharos {name}"), content_type="text/html")
        if name == "article":
            return web.Response(text=PAGE, content_type="text/html")
        if name == "pdf":
            return web.Response(body=b"%PDF-1.7 binary", content_type="application/pdf")
        if name == "image":
            return web.Response(body=b"\x89PNG\r\n\x1a\n\x00\x00", content_type="image/png")
        if name == "latin1":
            html = "<html><head><title>Café</title></head><body><p>Crème brûlée à Paris.</p></body></html>"
            return web.Response(body=html.encode("latin-1"), headers={"Content-Type": "text/html; charset=iso-8859-1"})
        if name == "badcharset":
            html = "<html><head><title>Grüße</title></head><body><p>Schöne Grüße aus Köln.</p></body></html>"
            return web.Response(body=html.encode("utf-8"),
                                headers={"Content-Type": "text/html; charset=no-such-charset"})
        if name == "huge":
            resp = web.StreamResponse(headers={"Content-Type": "text/html"})
            await resp.prepare(request)
            await resp.write(b"<html><head><title>Huge</title></head><body>")
            for _ in range(400):  # 400 x 10 KiB = 4 MiB; the client must stop early
                self.hits["huge-chunks"] += 1
                await resp.write(b"<p>" + b"word " * 2046 + b"</p>")
            await resp.write_eof()
            return resp
        if name == "loop":
            raise web.HTTPFound(f"/pages/loop?n={self.hits['page:loop']}")
        if name == "hop":
            raise web.HTTPFound("/pages/article")
        return web.Response(status=404, text="not found")

    async def geocode(self, request: web.Request) -> web.Response:
        if (early := await self._enter("geocode", request)) is not None:
            return early
        if request.query["name"] == "Nowhere":
            return web.json_response({"generationtime_ms": 0.1})
        return web.json_response({"results": [{"name": request.query["name"], "latitude": 48.85, "longitude": 2.35,
                                               "country": "France", "admin1": "Île-de-France"}]})

    async def archive(self, request: web.Request) -> web.Response:
        if (early := await self._enter("archive", request)) is not None:
            return early
        q = request.query
        return web.json_response({"latitude": float(q["latitude"]), "longitude": float(q["longitude"]), "daily": {
            "time": [q["start_date"]], "weather_code": [63], "temperature_2m_max": [21.4],
            "temperature_2m_min": [12.05], "temperature_2m_mean": [16.7], "precipitation_sum": [8.2],
            "rain_sum": [8.2], "snowfall_sum": [0.0], "wind_speed_10m_max": [5.3]}})

    async def owm_geo(self, request: web.Request) -> web.Response:
        if (early := await self._enter("owm_geo", request)) is not None:
            return early
        return web.json_response([{"name": request.query["q"], "lat": 51.5, "lon": -0.12}])

    async def owm_weather(self, request: web.Request) -> web.Response:
        if (early := await self._enter("owm_weather", request)) is not None:
            return early
        return web.json_response({"main": {"temp": 14.23, "feels_like": 13.1, "temp_min": 12.0, "temp_max": 16.0,
                                           "humidity": 71, "pressure": 1012},
                                  "weather": [{"description": "light rain"}], "wind": {"speed": 4.1}})
