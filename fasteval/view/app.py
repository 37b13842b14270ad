"""``fasteval view``: the aiohttp app serving the pages and the ``/api`` JSON behind them.

The app only reads run folders (through ``fasteval.view.data``), each request anew through the
run index, so a run still being written shows its new records on reload. Index and file reads
run in a worker thread: the event loop only parses requests and sends bytes.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from aiohttp import web

from fasteval.core.terminal import clean
from fasteval.runfolder.index import RunIndexError
from fasteval.view.access import ACCESS, Access, guard, security_headers
from fasteval.view.data import JobQuery, NotFound, RunSet, read_blob
from fasteval.view.pages import asset, error_page, jobs_page, summary_page
from fasteval.view.trajectory import ImageSrc, compare_page, job_page

RUNSET: web.AppKey[RunSet] = web.AppKey("runset", RunSet)


class BadQuery(ValueError):
    """A query parameter that cannot be read (HTTP 400)."""


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type="application/json")


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html")


# SQLite holds 64-bit integers; a page past 10^9 is a typo or a probe, never a real page.
_BOUNDS = {"seed": (-(2**63), 2**63 - 1), "page": (1, 10**9), "per_page": (1, 10**6)}


def _opt(q: Any, key: str, cast: Callable[[str], Any]) -> Any:
    raw = q.get(key)
    if raw in (None, ""):
        return None
    try:
        value = cast(raw[:100])
    except ValueError:
        raise BadQuery(f"query parameter {key}={raw[:100]!r} is not a valid {cast.__name__}") from None
    lo, hi = _BOUNDS.get(key, (None, None))
    if lo is not None and hi is not None and not lo <= value <= hi:
        raise BadQuery(f"query parameter {key}={raw[:100]!r} is out of range ({lo}..{hi})")
    return value


def parse_job_query(q: Any) -> JobQuery:
    """The /jobs and /api/jobs query string as a JobQuery (BadQuery on unreadable numbers)."""
    return JobQuery(run=q.get("run") or None, model=q.get("model") or None, suite=q.get("suite") or None,
                    setting=q.get("setting") or None, seed=_opt(q, "seed", int), status=q.get("status") or None,
                    error_kind=q.get("error_kind") or None, score_min=_opt(q, "score_min", float),
                    score_max=_opt(q, "score_max", float), q=q.get("q") or None, sort=q.get("sort") or "",
                    desc=q.get("desc") in ("1", "true"), page=_opt(q, "page", int) or 1,
                    per_page=_opt(q, "per_page", int) or 50)


def _blob_src(run: str) -> ImageSrc:
    return lambda ref: f"/blob/{quote(run)}/{ref}"


@web.middleware
async def _errors(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Missing things are 404 and bad parameters 400, as JSON under /api and as a page elsewhere."""
    api = request.path.startswith("/api/")
    try:
        resp: web.StreamResponse = await handler(request)
        return resp
    except NotFound as e:
        status, msg = 404, str(e)
    except BadQuery as e:
        status, msg = 400, str(e)
    except RunIndexError as e:  # the records file changed under the index (e.g. replaced by a merge)
        status, msg = 503, str(e)
    return _json({"error": msg}, status) if api else _html(error_page(status, msg), status)


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


async def api_runs(request: web.Request) -> web.Response:
    rs = request.app[RUNSET]
    return _json({"runs": [{"name": r.name, "path": str(r.path)} for r in rs.runs.values()]})


async def api_summary(request: web.Request) -> web.Response:
    return _json(await _call(request.app[RUNSET].summary))


async def api_jobs(request: web.Request) -> web.Response:
    return _json(await _call(request.app[RUNSET].jobs, parse_job_query(request.query)))


async def api_facets(request: web.Request) -> web.Response:
    return _json(await _call(request.app[RUNSET].facets, request.query.get("run") or None))


async def api_job(request: web.Request) -> web.Response:
    return _json(await _call(request.app[RUNSET].job, request.match_info["job_id"], request.query.get("run")))


def _task(request: web.Request) -> str:
    task = request.query.get("task")
    if not task:
        raise BadQuery("compare needs ?task=<task_id>")
    return task


async def api_compare(request: web.Request) -> web.Response:
    return _json(await _call(request.app[RUNSET].compare, _task(request)))


async def page_summary(request: web.Request) -> web.Response:
    return _html(summary_page(await _call(request.app[RUNSET].summary)))


async def page_jobs(request: web.Request) -> web.Response:
    rs = request.app[RUNSET]
    query = parse_job_query(request.query)
    result = await _call(rs.jobs, query)
    facets = await _call(rs.facets, query.run)
    return _html(jobs_page(result, facets, list(rs.runs), query))


async def page_job(request: web.Request) -> web.Response:
    job = await _call(request.app[RUNSET].job, request.match_info["job_id"], request.query.get("run"))
    return _html(job_page(job, _blob_src(job["run"])))


async def page_compare(request: web.Request) -> web.Response:
    data = await _call(request.app[RUNSET].compare, _task(request))
    return _html(compare_page(data, _blob_src))


async def blob(request: web.Request) -> web.Response:
    path, ctype = request.app[RUNSET].blob_path(request.match_info["run"], request.match_info["ref"])
    body = await _call(read_blob, path)
    # Content-addressed: the bytes behind a reference never change.
    return web.Response(body=body, content_type=ctype,
                        headers={"Cache-Control": "public, max-age=31536000, immutable"})


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    types = {"style.css": "text/css", "app.js": "text/javascript"}
    if name not in types:
        raise NotFound(f"no static file {name!r}")
    return web.Response(text=asset(name), content_type=types[name])


def make_app(runs: RunSet, access: Access | None = None) -> web.Application:
    """The viewer; ``access`` says which Host names and which token it accepts (default: loopback
    names only, no token: what ``fasteval view`` on 127.0.0.1 serves)."""
    app = web.Application(middlewares=[guard, _errors])
    app[RUNSET] = runs
    app[ACCESS] = access or Access()
    app.on_response_prepare.append(security_headers)

    async def close_indexes(app: web.Application) -> None:
        runs.close()

    app.on_cleanup.append(close_indexes)
    app.router.add_get("/", page_summary)
    app.router.add_get("/jobs", page_jobs)
    app.router.add_get("/job/{job_id}", page_job)
    app.router.add_get("/compare", page_compare)
    app.router.add_get("/blob/{run}/{ref}", blob)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/runs", api_runs)
    app.router.add_get("/api/summary", api_summary)
    app.router.add_get("/api/jobs", api_jobs)
    app.router.add_get("/api/facets", api_facets)
    app.router.add_get("/api/job/{job_id}", api_job)
    app.router.add_get("/api/compare", api_compare)
    return app


async def serve(paths: list[Path], host: str, port: int, access: Access | None = None) -> None:
    """Serve until interrupted; prints the URL (with the real port when ``port`` is 0, and the
    token when one is needed)."""
    access = access or Access()
    app = make_app(RunSet(paths), access)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    real_port = runner.addresses[0][1] if runner.addresses else port
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{real_port}/" + (f"?token={access.token}" if access.token else "")
    print(clean(f"fasteval view: serving {len(app[RUNSET].runs)} run(s) on {url}"), file=sys.stderr, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
