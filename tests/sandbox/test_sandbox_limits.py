"""Every limit, proven by code that tries to break it; after each attempt the pool still works."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from sandbox import SandboxLimits, SandboxPool

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

PLANTED_KEY = "FASTEVAL_SANDBOX_TEST_API_KEY"
THIS_FILE = str(Path(__file__).resolve())
LIMITS = SandboxLimits(
    timeout_s=30, memory_bytes=2 << 30, cpu_s=2, max_procs=16, file_bytes=8 << 20, open_files=64, output_chars=1000
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[SandboxPool]:
    os.environ[PLANTED_KEY] = "sk-live-should-never-leak"
    try:
        async with SandboxPool(2, limits=LIMITS) as p:
            if p.isolation != "jail":
                pytest.skip("namespaces unavailable: confinement tests need jail isolation")
            yield p
    finally:
        os.environ.pop(PLANTED_KEY, None)


async def _still_works(pool: SandboxPool) -> None:
    r = await pool.run("print('alive')")
    assert r.status == "ok" and r.stdout == "alive\n"


async def test_infinite_loop_times_out_and_only_its_child_is_killed(pool: SandboxPool) -> None:
    before = pool.stats()
    await pool.run("kept = 7", session_id="bystander")
    r = await pool.run("while True:\n    pass", timeout_s=1)
    assert r.status == "timeout" and "TimeoutError" in r.stderr
    after = pool.stats()
    assert after["restarts"] == before["restarts"] and after["timeouts"] == before["timeouts"] + 1
    # the worker survived, so a session living on it did too
    assert (await pool.run("print(kept)", session_id="bystander")).stdout == "7\n"
    await pool.release("bystander")
    await _still_works(pool)


async def test_cpu_time_limit_kills_a_spinning_worker(pool: SandboxPool) -> None:
    r = await pool.run("while True:\n    pass")
    assert r.status == "crashed" and "CPU time limit" in r.stderr
    await _still_works(pool)


async def test_8gb_allocation_is_refused(pool: SandboxPool) -> None:
    r = await pool.run("import numpy as np\na = np.ones(8 * 2**30, dtype=np.uint8)\nprint(a.sum())")
    assert r.status in ("error", "crashed")
    assert "MemoryError" in r.stderr or "killed" in r.stderr
    await _still_works(pool)


async def test_fork_bomb_is_bounded(pool: SandboxPool) -> None:
    code = (
        "import os\n"
        "try:\n"
        "    while True:\n"
        "        os.fork()\n"
        "except OSError as e:\n"
        "    print('refused', type(e).__name__)\n"
    )
    r = await pool.run(code)
    assert r.status == "ok", r.stderr
    assert r.stdout.startswith("refused")
    await _still_works(pool)


async def test_gigabyte_of_stdout_is_truncated_while_written(pool: SandboxPool) -> None:
    code = "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)"
    r = await pool.run(code)
    assert r.status == "ok"
    assert r.stdout_chars == 1 << 30
    assert len(r.stdout) < 1200 and "truncated" in r.stdout


async def test_parent_environment_does_not_leak(pool: SandboxPool) -> None:
    code = (
        "import os\n"
        f"print(os.environ.get({PLANTED_KEY!r}))\n"
        "print(os.environ['HOME'])\n"
        "open(f'/proc/{os.getppid()}/environ').read()"
    )
    r = await pool.run(code)
    assert r.stdout == "None\n/sandbox/work\n"
    # the zygote's /proc entry is hidden (hidepid) or, without that, unreadable
    assert "FileNotFoundError" in r.stderr or "PermissionError" in r.stderr
    assert "sk-live" not in r.stdout + r.stderr


async def test_no_connection_to_a_loopback_server(pool: SandboxPool) -> None:
    accepted: list[int] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('connected')"
        r = await pool.run(code)
    finally:
        server.close()
        await server.wait_closed()
    assert r.status == "error" and "connected" not in r.stdout
    assert "OSError" in r.stderr or "ConnectionRefusedError" in r.stderr
    assert accepted == []


@pytest.fixture
def run_folder() -> Iterator[Path]:
    """A world-readable folder outside the sandbox, like a run folder with results and caches."""
    folder = Path(tempfile.mkdtemp(prefix="fasteval-run-"))
    folder.chmod(0o755)
    (folder / "secret.txt").write_text("judge cache")
    (folder / "secret.txt").chmod(0o644)
    yield folder
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


async def test_files_outside_the_working_folder_are_not_readable(pool: SandboxPool, run_folder: Path) -> None:
    r = await pool.run(f"print(open({str(run_folder / 'secret.txt')!r}).read())")
    assert r.status == "error" and "FileNotFoundError" in r.stderr
    repo = await pool.run(f"import os\nprint(os.path.exists({THIS_FILE!r}))")
    assert repo.stdout == "False\n"


async def test_nothing_outside_the_working_folder_is_writable(pool: SandboxPool) -> None:
    for target in ("/etc/pwned", "/tmp/fasteval-pwned", "/usr/pwned", "/sandbox/pwned/x"):
        r = await pool.run(f"open({target!r}, 'w').write('x')")
        assert r.status == "error", target
        assert "OSError" in r.stderr or "Error" in r.stderr
    assert not await asyncio.to_thread(os.path.exists, "/tmp/fasteval-pwned")
    ok = await pool.run("open('mine.txt', 'w').write('x')\nopen(PROCESSED_IMAGE_SAVE_PATH / 'o.txt', 'w').write('y')")
    assert ok.status == "ok", ok.stderr


async def test_file_size_and_open_file_limits(pool: SandboxPool) -> None:
    big = await pool.run("open('big.bin', 'wb').write(b'0' * (64 << 20))")
    assert big.status == "error" and "File too large" in big.stderr
    many = await pool.run("fs = [open(f'f{i}', 'w') for i in range(200)]")
    assert many.status == "error" and "Too many open files" in many.stderr


async def test_killing_the_parent_is_refused(pool: SandboxPool) -> None:
    r = await pool.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
    assert r.status == "error" and "PermissionError" in r.stderr
    await _still_works(pool)


@pytest.mark.parametrize(
    ("code", "reason"),
    [("import ctypes\nctypes.string_at(0)", "segmentation fault"), ("import os\nos._exit(3)", "exited with code 3")],
)
async def test_crashed_call_is_reported_and_the_pool_goes_on(pool: SandboxPool, code: str, reason: str) -> None:
    before = pool.stats()["crashes"]
    r = await pool.run(code)
    assert r.status == "crashed" and reason in r.stderr
    assert pool.stats()["crashes"] == before + 1
    await _still_works(pool)


async def test_crash_inside_a_session_reports_lost_state(pool: SandboxPool) -> None:
    await pool.run("x = 1", session_id="doomed")
    r = await pool.run("import os\nos._exit(1)", session_id="doomed")
    assert r.status == "crashed" and "session" in r.stderr
    after = await pool.run("print(x)", session_id="doomed")
    assert "NameError" in after.stderr
    await pool.release("doomed")


async def test_process_isolation_fallback_still_blocks_network_and_processes() -> None:
    async with SandboxPool(1, isolation="process") as p:
        assert (await p.run("print(1)")).stdout == "1\n"
        net = await p.run("import socket\nsocket.socket()")
        assert "network access is disabled" in net.stderr
        fork = await p.run("import os\nos.fork()")
        assert "starting processes is disabled" in fork.stderr
