"""``fasteval data fetch`` against a loopback server that speaks the hub's download API.

The server (hub_server.FakeHub) answers the revision and resolve endpoints with the hub's headers
and redirects LFS files to a content host on another port; each test plays one thing a real
network does: a connection that drops mid-file, a server that ignores Range, bytes that are not
the ones vouched for, a mirror that serves other bytes later, no network at all, a gated dataset.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import hub_server
import pytest

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import SUITES
from fasteval.suites.data_fetch import DATASETS, FetchError, fetch, source
from fasteval.suites.hub.lock import LOCK_NAME
from fasteval.suites.tirbench import load_tirbench

REPO = "Agents-X/TIR-Bench"


@pytest.fixture
def tir(fake_hub: hub_server.FakeHub) -> dict[str, bytes]:
    files = hub_server.synthetic_tirbench()
    fake_hub.add_dataset(REPO, files)
    return files


def _lock(dest: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((dest / LOCK_NAME).read_text())
    return data


def test_every_dataset_is_a_suite_and_names_resolve() -> None:
    assert set(DATASETS) <= set(SUITES)
    assert source("TIR-Bench").repo_id == REPO
    assert source("vtb").repo_id == "ScaleAI/VisualToolBench"
    with pytest.raises(ValueError, match="known: \\[.*'tirbench', .*'vistahop', .*'visualtoolbench', .*'tirbench-reference'"):
        source("mmmu")


def test_fetch_downloads_checks_locks_and_the_loader_reads_it(
        tmp_path: Path, fake_hub: hub_server.FakeHub, tir: dict[str, bytes]) -> None:
    lines: list[str] = []
    path = fetch("tirbench", tmp_path / "TIR-Bench", report=lines.append)
    assert path == tmp_path / "TIR-Bench"
    assert (path / "TIR-Bench.json").read_bytes() == tir["TIR-Bench.json"]
    assert (path / "data.zip").read_bytes() == tir["data.zip"]
    lock = _lock(path)
    entry = lock["repos"][0]  # type: ignore[index]
    assert entry["repo"] == REPO and entry["revision"] == "main" and len(entry["commit"]) == 40
    assert entry["files"]["data.zip"] == {"size": len(tir["data.zip"]),
                                          "sha256": hashlib.sha256(tir["data.zip"]).hexdigest()}
    # The LFS file came from the content host the hub redirected to; the JSON from the hub itself.
    hosts = {r["path"].rsplit("/", 1)[-1]: r["host"] for r in fake_hub.requests if r["method"] == "GET"}
    assert fake_hub.content.endswith(hosts[hashlib.sha256(tir["data.zip"]).hexdigest()])
    assert fake_hub.endpoint.endswith(hosts["TIR-Bench.json"])
    items = list(load_tirbench(str(path), BlobStore(tmp_path / "blobs")))
    assert len(items) == 6 and all(isinstance(t, Task) for t in items)
    assert not list(path.glob(".*.part"))
    # A second fetch checks every file against the lock and asks the hub nothing.
    fake_hub.requests.clear()
    fetch("tirbench", path, report=lines.append)
    assert fake_hub.requests == [] and "match the lock file" in lines[-1]


def test_a_dropped_connection_is_resumed_with_range(
        tmp_path: Path, fake_hub: hub_server.FakeHub, tir: dict[str, bytes]) -> None:
    fake_hub.cut[(REPO, "data.zip")] = [700, 900]  # two responses break off mid-file
    path = fetch("tirbench", tmp_path / "d")
    assert (path / "data.zip").read_bytes() == tir["data.zip"]
    ranges = [r["range"] for r in fake_hub.requests if r["path"].startswith("/blobs/")]
    assert ranges == [None, "bytes=700-", "bytes=1600-"]


def test_a_partial_file_from_an_earlier_run_is_resumed(
        tmp_path: Path, fake_hub: hub_server.FakeHub, tir: dict[str, bytes]) -> None:
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / ".data.zip.part").write_bytes(tir["data.zip"][:1000])  # what a killed fetch leaves
    fetch("tirbench", dest)
    assert (dest / "data.zip").read_bytes() == tir["data.zip"]
    assert [r["range"] for r in fake_hub.requests if r["path"].startswith("/blobs/")] == ["bytes=1000-"]


def test_a_server_that_ignores_range_starts_the_file_over(
        tmp_path: Path, fake_hub: hub_server.FakeHub, tir: dict[str, bytes]) -> None:
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / ".data.zip.part").write_bytes(b"x" * 1000)  # garbage a resume must not keep
    fake_hub.ignore_range = True
    fetch("tirbench", dest)
    assert (dest / "data.zip").read_bytes() == tir["data.zip"]


def test_a_corrupted_file_is_refused_and_nothing_is_kept(
        tmp_path: Path, fake_hub: hub_server.FakeHub, tir: dict[str, bytes]) -> None:
    fake_hub.corrupt.add((REPO, "data.zip"))
    with pytest.raises(FetchError, match=r"data.zip: the downloaded file is corrupt \(its sha256 is .*nothing was kept"):
        fetch("tirbench", tmp_path / "d")
    assert not (tmp_path / "d" / "data.zip").exists() and not list((tmp_path / "d").glob(".*.part"))
    assert not (tmp_path / "d" / LOCK_NAME).exists()
    # A corrupt non-LFS file is caught by its git blob id the same way.
    fake_hub.corrupt = {(REPO, "TIR-Bench.json")}
    with pytest.raises(FetchError, match="TIR-Bench.json: the downloaded file is corrupt .*git blob id"):
        fetch("tirbench", tmp_path / "e")


def test_a_file_whose_checksum_changed_upstream_is_refused(
        tmp_path: Path, fake_hub: hub_server.FakeHub, tir: dict[str, bytes]) -> None:
    path = fetch("tirbench", tmp_path / "d")
    commit = _lock(path)["repos"][0]["commit"]  # type: ignore[index]
    fake_hub.replace_file(REPO, commit, "data.zip", tir["data.zip"] + b"tampered")
    (path / "data.zip").unlink()
    with pytest.raises(FetchError, match="data.zip: the hub now serves bytes with sha256 .* but the lock file recorded"):
        fetch("tirbench", path)
    assert not (path / "data.zip").exists()


def test_a_local_file_that_differs_from_the_lock_is_reported_not_overwritten(
        tmp_path: Path, fake_hub: hub_server.FakeHub, tir: dict[str, bytes]) -> None:
    path = fetch("tirbench", tmp_path / "d")
    (path / "TIR-Bench.json").write_text("[]")
    with pytest.raises(FetchError, match="differ from the lock file, e.g. .*TIR-Bench.json: refusing to overwrite"):
        fetch("tirbench", path)
    assert (path / "TIR-Bench.json").read_text() == "[]"


def test_offline_mode_uses_what_is_here_and_says_what_is_missing(
        tmp_path: Path, fake_hub: hub_server.FakeHub, tir: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    path = fetch("tirbench", tmp_path / "d")
    fake_hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch("tirbench", path) == path and fake_hub.requests == []
    (path / "data.zip").unlink()
    with pytest.raises(FetchError, match="HF_HUB_OFFLINE is set and 1 locked file"):
        fetch("tirbench", path)
    with pytest.raises(FetchError, match="HF_HUB_OFFLINE is set and .* holds no fetched copy"):
        fetch("tirbench", tmp_path / "new")
    assert fake_hub.requests == []


def test_no_network_is_one_line_that_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(FetchError) as e:
        fetch("tirbench", tmp_path / "d")
    msg = str(e.value)
    assert "\n" not in msg
    assert "cannot reach http://127.0.0.1:9" in msg and "HF_ENDPOINT" in msg and "HF_HUB_OFFLINE=1" in msg
    assert "TIR-Bench.json and data.zip from https://huggingface.co/datasets/Agents-X/TIR-Bench" in msg


def test_a_moved_revision_needs_update(tmp_path: Path, fake_hub: hub_server.FakeHub,
                                       tir: dict[str, bytes]) -> None:
    path = fetch("tirbench", tmp_path / "d")
    first = _lock(path)["repos"][0]["commit"]  # type: ignore[index]
    second = fake_hub.add_dataset(REPO, dict(tir, **{"TIR-Bench.json": b"[]"}), revision="v2")
    with pytest.raises(FetchError, match=f"pins commit {first[:12]} .*'v2' is commit {second[:12]}: pass --update"):
        fetch("tirbench", path, revision="v2")
    assert fetch("tirbench", path) == path  # the lock's own commit still fetches, main moving or not
    fetch("tirbench", path, revision="v2", update=True)
    assert _lock(path)["repos"][0]["commit"] == second  # type: ignore[index]
    assert (path / "TIR-Bench.json").read_bytes() == b"[]"
    third = fake_hub.add_dataset(REPO, dict(tir, **{"TIR-Bench.json": b"[{}]"}), revision="v2")
    fetch("tirbench", path, update=True)  # --update alone follows the locked revision to its new commit
    assert _lock(path)["repos"][0]["commit"] == third  # type: ignore[index]


def test_a_gated_dataset_needs_the_token_which_never_leaves_the_hub(
        tmp_path: Path, fake_hub: hub_server.FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub.add_dataset(REPO, hub_server.synthetic_tirbench(), gated=True)
    with pytest.raises(FetchError, match="refused access \\(401.*HF_TOKEN"):
        fetch("tirbench", tmp_path / "d")
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    fake_hub.requests.clear()
    fetch("tirbench", tmp_path / "d")
    on_hub = [r for r in fake_hub.requests if fake_hub.endpoint.endswith(r["host"])]
    on_content = [r for r in fake_hub.requests if fake_hub.content.endswith(r["host"])]
    assert on_hub and on_content and all(r["auth"] for r in on_hub) and not any(r["auth"] for r in on_content)


def test_a_renamed_dataset_and_a_busy_hub(tmp_path: Path, fake_hub: hub_server.FakeHub) -> None:
    files = hub_server.synthetic_tirbench()
    fake_hub.add_dataset("Agents-X/TIR-Bench-v2", files)
    fake_hub.renamed[REPO] = "Agents-X/TIR-Bench-v2"
    fake_hub.add_dataset(REPO, files)  # the listing still answers under the old name
    fake_hub.repos.pop(REPO)
    fake_hub.repos[REPO] = fake_hub.repos["Agents-X/TIR-Bench-v2"]
    fake_hub.fail_listing = 2  # two 503s, then an answer
    path = fetch("tirbench", tmp_path / "d")
    assert (path / "data.zip").read_bytes() == files["data.zip"]


@pytest.mark.slow
def test_the_cli_fetches_and_exits_2_with_one_line_offline(tmp_path: Path, fake_hub: hub_server.FakeHub,
                                                           tir: dict[str, bytes]) -> None:
    cli = [sys.executable, "-m", "fasteval.cli.main", "data", "fetch", "tirbench", "--dest", str(tmp_path / "d")]
    env = {**os.environ, "HF_ENDPOINT": fake_hub.endpoint}
    ok = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == str(tmp_path / "d") and "checksum ok" in ok.stderr
    down = subprocess.run(cli[:-1] + [str(tmp_path / "e")], capture_output=True, text=True, timeout=120,
                          env={**env, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert down.returncode == 2 and down.stderr.count("\n") == 1 and down.stderr.startswith("error: tirbench: cannot reach")
    helptext = subprocess.run(cli[:5] + ["--help"], capture_output=True, text=True, timeout=60).stdout
    assert all(name in helptext for name in DATASETS) and "HF_HUB_OFFLINE" in helptext


def test_vistahop_is_manual_and_names_the_github_repo(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match=r"ahang0712/vistahop.*git lfs pull --include data/subset1.parquet"):
        fetch("vistahop", tmp_path)


def test_a_zip_that_escapes_the_folder_is_refused(tmp_path: Path, fake_hub: hub_server.FakeHub) -> None:
    import io
    import zipfile

    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../evil.txt", "x")
    fake_hub.add_dataset(REPO, {"TIR-Bench.json": b"[]", "data.zip": archive.getvalue()})
    with pytest.raises(FetchError, match="outside"):
        fetch("tirbench", tmp_path / "dest")
    assert not (tmp_path / "evil.txt").exists()
