"""A loopback server speaking the Hugging Face hub's download API, for tests and the README check.

It is a fake of the hub (a real HTTP server on 127.0.0.1, written from the hub's public API and
the headers its own client reads), never of our code:

- ``GET /api/datasets/{org}/{name}/revision/{revision}`` (``?blobs=true``): ``sha`` and
  ``siblings`` (``rfilename``, and with blobs ``size``, ``blobId``, ``lfs.{sha256,size,pointerSize}``);
  404 with ``X-Error-Code: RepoNotFound`` / ``RevisionNotFound``; 401 ``GatedRepo`` without the token.
- ``HEAD`` / ``GET /datasets/{org}/{name}/resolve/{revision}/{path}``: ``X-Repo-Commit``; a regular
  file is served here with ``ETag`` = its git blob id; an LFS file answers 302 to the content host
  with ``X-Linked-Etag`` = its sha256, ``X-Linked-Size`` and the pointer's ``ETag``. A renamed
  repository answers 307 with a relative ``Location``.
- The content host (another port): ``GET /blobs/{sha256}``, with ``Range`` (206, ``Content-Range``).

Faults a test can set: ``cut[(repo, path)] = [n, ...]`` (the next responses of that file send
only n bytes of the promised length and drop the connection), ``corrupt`` (one byte flipped
while the headers vouch for the real bytes), ``ignore_range``, ``fail_listing`` (503s), a token
that gated repositories demand. Every request is logged in ``requests``.

Run as a script it serves a small synthetic TIR-Bench release (generated images, not the
benchmark's) for the README's first recipe: ``python tests/suites/hub/hub_server.py --tirbench``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

LFS_MIN = 4096
"""Files at least this big (and every .parquet and .zip) are stored in LFS, as the hub does with big binaries."""


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class HubFile:
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def pointer(self) -> bytes:
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n".encode()

    def sibling(self, path: str, blobs: bool) -> dict[str, Any]:
        if not blobs:
            return {"rfilename": path}
        out: dict[str, Any] = {"rfilename": path, "size": len(self.data),
                               "blobId": git_oid(self.pointer if self.lfs else self.data)}
        if self.lfs:
            out["lfs"] = {"sha256": self.sha256, "size": len(self.data), "pointerSize": len(self.pointer)}
        return out


@dataclass
class Repo:
    commits: dict[str, dict[str, HubFile]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    gated: bool = False


class FakeHub:
    """The hub and its content host on two loopback ports; ``async with FakeHub() as hub: hub.endpoint``."""

    def __init__(self, token: str | None = None, port: int = 0) -> None:
        self.port = port
        self.repos: dict[str, Repo] = {}
        self.renamed: dict[str, str] = {}
        self.token = token
        self.cut: dict[tuple[str, str], list[int]] = {}
        self.corrupt: set[tuple[str, str]] = set()
        self.ignore_range = False
        self.fail_listing = 0
        self.requests: list[dict[str, Any]] = []
        self._runners: list[web.AppRunner] = []
        self.endpoint = ""
        self.content = ""

    def add_dataset(self, repo: str, files: dict[str, bytes], *, revision: str = "main",
                    lfs: set[str] | None = None, gated: bool = False) -> str:
        """Commit ``files`` to ``revision`` of dataset ``repo``; returns the commit's sha."""
        def is_lfs(path: str, data: bytes) -> bool:
            return path in lfs if lfs is not None else len(data) >= LFS_MIN or path.endswith((".parquet", ".zip"))

        entry = {p: HubFile(d, is_lfs(p, d)) for p, d in files.items()}
        sha = hashlib.sha1(json.dumps({p: git_oid(d) for p, d in sorted(files.items())}).encode()
                           + repo.encode() + revision.encode()).hexdigest()
        r = self.repos.setdefault(repo, Repo())
        r.commits[sha] = entry
        r.refs[revision] = sha
        r.gated = r.gated or gated
        return sha

    def replace_file(self, repo: str, commit: str, path: str, data: bytes) -> None:
        """A mirror that now serves other bytes under the same commit (what a lock file must catch)."""
        old = self.repos[repo].commits[commit][path]
        self.repos[repo].commits[commit][path] = HubFile(data, old.lfs)

    async def __aenter__(self) -> FakeHub:
        hub = web.Application()
        hub.router.add_get("/api/datasets/{org}/{name}/revision/{rev:.+}", self._listing)
        hub.router.add_get("/api/datasets/{org}/{name}", self._listing)
        hub.router.add_route("*", "/datasets/{org}/{name}/resolve/{rev}/{path:.+}", self._resolve)
        content = web.Application()
        content.router.add_route("*", "/blobs/{sha}", self._blob)
        for app, attr, port in ((hub, "endpoint", self.port), (content, "content", 0)):
            runner = web.AppRunner(app, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", port)
            await site.start()
            self._runners.append(runner)
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            setattr(self, attr, f"http://127.0.0.1:{port}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        for runner in self._runners:
            await runner.cleanup()

    def _log(self, request: web.Request) -> None:
        self.requests.append({"method": request.method, "path": request.path, "range": request.headers.get("Range"),
                              "auth": "Authorization" in request.headers, "host": request.host})

    def _repo(self, request: web.Request) -> tuple[str, Repo | None]:
        name = f"{request.match_info['org']}/{request.match_info['name']}"
        return name, self.repos.get(name)

    def _denied(self, request: web.Request, repo: Repo) -> web.Response | None:
        if repo.gated and request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.Response(status=401, headers={"X-Error-Code": "GatedRepo",
                                                     "X-Error-Message": "Access to this dataset is restricted."})
        return None

    async def _listing(self, request: web.Request) -> web.Response:
        self._log(request)
        if self.fail_listing > 0:
            self.fail_listing -= 1
            return web.Response(status=503, text="busy")
        name, repo = self._repo(request)
        if repo is None:
            return web.Response(status=404, headers={"X-Error-Code": "RepoNotFound"}, text="Repository not found")
        denied = self._denied(request, repo)
        if denied is not None:
            return denied
        rev = request.match_info.get("rev", "main")
        sha = rev if rev in repo.commits else repo.refs.get(rev)
        if sha is None:
            return web.Response(status=404, headers={"X-Error-Code": "RevisionNotFound"}, text="Invalid rev id")
        blobs = request.query.get("blobs", "").lower() == "true"
        siblings = [f.sibling(p, blobs) for p, f in sorted(repo.commits[sha].items())]
        return web.json_response({"_id": sha[:24], "id": name, "sha": sha, "private": False, "gated": repo.gated,
                                  "siblings": siblings})

    async def _resolve(self, request: web.Request) -> web.StreamResponse:
        self._log(request)
        name, repo = self._repo(request)
        rev, path = request.match_info["rev"], request.match_info["path"]
        if repo is None and name in self.renamed:
            return web.Response(status=307, headers={"Location": f"/datasets/{self.renamed[name]}/resolve/{rev}/{path}"})
        if repo is None:
            return web.Response(status=404, headers={"X-Error-Code": "RepoNotFound"})
        denied = self._denied(request, repo)
        if denied is not None:
            return denied
        sha = rev if rev in repo.commits else repo.refs.get(rev)
        if sha is None:
            return web.Response(status=404, headers={"X-Error-Code": "RevisionNotFound"})
        file = repo.commits[sha].get(path)
        if file is None:
            return web.Response(status=404, headers={"X-Error-Code": "EntryNotFound", "X-Repo-Commit": sha})
        if file.lfs:
            return web.Response(status=302, headers={
                "Location": f"{self.content}/blobs/{file.sha256}?repo={name}&path={path}&commit={sha}",
                "X-Repo-Commit": sha, "X-Linked-Etag": f'"{file.sha256}"', "X-Linked-Size": str(len(file.data)),
                "ETag": f'"{git_oid(file.pointer)}"'})
        return await self._send(request, name, path, file,
                                {"X-Repo-Commit": sha, "ETag": f'"{git_oid(file.data)}"'})

    async def _blob(self, request: web.Request) -> web.StreamResponse:
        self._log(request)
        name, path, commit = request.query.get("repo", ""), request.query.get("path", ""), request.query.get("commit")
        repo = self.repos.get(name)
        file = repo.commits.get(commit or "", {}).get(path) if repo else None
        if file is None or file.sha256 != request.match_info["sha"]:
            return web.Response(status=404, text="no such blob")
        return await self._send(request, name, path, file, {"ETag": f'"{file.sha256}"'})

    async def _send(self, request: web.Request, repo: str, path: str, file: HubFile,
                    headers: dict[str, str]) -> web.StreamResponse:
        data = bytearray(file.data)
        if (repo, path) in self.corrupt and data:
            data[len(data) // 2] ^= 0xFF
        start = 0
        rng = request.headers.get("Range", "")
        if rng.startswith("bytes=") and not self.ignore_range:
            start = int(rng[6:].split("-")[0])
            if start >= len(data):
                return web.Response(status=416, headers={"Content-Range": f"bytes */{len(data)}"})
        body = bytes(data[start:])
        resp = web.StreamResponse(status=206 if start else 200, headers=headers)
        resp.content_length = len(body)
        if start:
            resp.headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        resp.headers["Accept-Ranges"] = "bytes"
        await resp.prepare(request)
        if request.method == "HEAD":
            return resp
        cuts = self.cut.get((repo, path))
        if cuts:
            n = cuts.pop(0)
            await resp.write(body[:n])
            await asyncio.sleep(0.01)
            assert request.transport is not None
            request.transport.close()  # the promised length never arrives: a dropped connection
            return resp
        await resp.write(body)
        await resp.write_eof()
        return resp


def synthetic_tirbench(n: int = 6) -> dict[str, bytes]:
    """A TIR-Bench-shaped release (TIR-Bench.json + data.zip of generated PNGs), not the benchmark's data."""
    import pyvips

    rows, archive = [], io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        for i in range(n):
            png = (pyvips.Image.black(64, 48, bands=3) + [20 * i, 40, 200 - 20 * i]).cast("uchar").pngsave_buffer()
            zf.writestr(f"data/color/{i}.png", png)
            rows.append({"id": i, "task": "color", "prompt": "Which colour dominates the image? A. red B. green "
                         "C. blue D. grey. Answer with the letter.", "answer": "C" if i < 3 else "A",
                         "image_1": f"data/color/{i}.png", "image_2": None, "meta_data": {}})
    return {"TIR-Bench.json": json.dumps(rows).encode(), "data.zip": archive.getvalue()}


async def _serve(port: int) -> None:
    hub = FakeHub(port=port)
    hub.add_dataset("Agents-X/TIR-Bench", synthetic_tirbench())
    async with hub:
        print(f"HF_ENDPOINT={hub.endpoint}", flush=True)
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="a loopback fake of the hub's download API")
    parser.add_argument("--tirbench", action="store_true", help="serve a synthetic Agents-X/TIR-Bench (the default)")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        asyncio.run(_serve(args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
