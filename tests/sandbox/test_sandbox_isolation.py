"""Issue 8, items 9-12: hostile code in one call cannot reach any later call, the host, or our memory.

One worker, so every attack and every innocent call after it go through the same zygote.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from PIL import Image

from sandbox import SandboxLimits, SandboxPool
from tests.sandbox import hostile

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]
LIMITS = SandboxLimits(timeout_s=20, output_chars=1000, max_output_images=3, max_image_pixels=10_000)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[SandboxPool]:
    async with SandboxPool(1, limits=LIMITS) as p:
        if p.isolation != "jail":
            pytest.skip("namespaces unavailable: isolation tests need jail isolation")
        yield p


async def _innocents_are_exact(pool: SandboxPool, n: int = 4) -> None:
    for k in range(n):
        r = await pool.run(hostile.innocent(k + 3))
        assert (r.status, r.stdout, r.stderr) == ("ok", hostile.innocent_stdout(k + 3), ""), r


async def test_threads_of_a_call_die_with_it(pool: SandboxPool) -> None:
    r = await pool.run(hostile.THREAD_KEEPS_WRITING)
    # its threads may garble its own reply (they write to every fd it has): its own business
    assert r.status in ("ok", "crashed")
    await asyncio.sleep(0.3)
    check = await pool.run("import os, threading\nprint(threading.active_count(), os.path.exists('leak.txt'))")
    assert check.stdout == "1 False\n", check
    await _innocents_are_exact(pool)


async def test_forged_reply_frames_reach_no_later_call(pool: SandboxPool) -> None:
    r = await pool.run(hostile.FORGE_REPLY_FRAMES)
    assert "FORGED" not in r.stdout
    await _innocents_are_exact(pool)


async def test_patching_the_runner_affects_only_its_own_call(pool: SandboxPool) -> None:
    r = await pool.run(hostile.PATCH_THE_RUNNER)
    assert r.status in ("ok", "crashed")  # it broke its own json.dumps, hence maybe its own reply
    await _innocents_are_exact(pool)
    seen = await pool.run("import os\nprint(os.path.exists('stolen.txt'))")
    assert seen.stdout == "False\n"


async def test_a_session_keeps_its_threads_to_itself(pool: SandboxPool) -> None:
    await pool.run(hostile.SESSION_THREAD_WRITES_FILES, session_id="noisy")
    await _innocents_are_exact(pool, 2)
    other = await pool.run("import os, time\ntime.sleep(0.2)\nprint(sorted(os.listdir('.')))", session_id="quiet")
    assert other.stdout == "['out']\n", other
    peek = await pool.run("import os\nprint(os.listdir('/sandbox/sessions'))")
    assert peek.status == "error" and "PermissionError" in peek.stderr
    mine = await pool.run("import os, threading\nprint(os.path.exists('mine.txt'), threading.active_count())", session_id="noisy")
    assert mine.stdout == "True 2\n", mine  # its own folder and its own thread, still there
    await pool.release("noisy")
    await pool.release("quiet")
    await _innocents_are_exact(pool, 2)


async def test_host_processes_are_invisible() -> None:
    host = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(120)", "--api-key", hostile.FAKE_KEY
    )
    try:
        async with SandboxPool(1) as p:
            if p.isolation != "jail":
                pytest.skip("namespaces unavailable")
            r = await p.run(hostile.READ_HOST_CMDLINES)
    finally:
        host.kill()
        await host.wait()
    assert r.status == "ok", r
    assert hostile.FAKE_KEY not in r.stdout + r.stderr
    assert r.stdout.startswith("1 processes visible")  # only the call itself


async def test_a_call_finds_nothing_of_earlier_calls_in_its_memory(pool: SandboxPool) -> None:
    # Call children are forked from a template that never sees a request: no code, output or
    # input of an earlier call is in a later call's memory, not even freed and not yet overwritten.
    parts = ("remnant", "of", "an", "earlier", "call", "7f3a9c")
    secret = "-".join(parts)
    png = io.BytesIO()
    Image.new("RGB", (4, 4)).save(png, "PNG", pnginfo=None)
    for _ in range(3):
        r = await pool.run(f"s = {secret!r}\nprint(s * 3)", images=[png.getvalue() + secret.encode()])
        assert r.stdout == secret * 3 + "\n", r
    scan = await pool.run(hostile.SCAN_OWN_MEMORY.replace("PARTS", repr(parts)))
    assert scan.stdout == "1\n", scan  # the needle it searched for, nothing else


async def test_ipc_objects_cannot_be_created(pool: SandboxPool) -> None:
    r = await pool.run(hostile.SYSV_SHARED_MEMORY)
    assert r.stdout == "shmget -1\n", r


async def test_a_50mb_exception_comes_back_bounded(pool: SandboxPool) -> None:
    r = await pool.run(hostile.HUGE_EXCEPTION)
    assert r.status == "error"
    assert r.error is not None and r.error.startswith("ValueError: EEEE") and len(r.error) < 2_100
    assert len(r.stderr) < LIMITS.output_chars + 300 and "truncated" in r.stderr
    await _innocents_are_exact(pool, 1)


async def test_output_images_are_capped_in_number_and_pixels(pool: SandboxPool) -> None:
    code = (
        "from PIL import Image\n"
        "for i in range(6):\n"
        "    Image.new('RGB', (50, 50)).save(PROCESSED_IMAGE_SAVE_PATH / f'transformed_image_{i}.png')\n"
        "Image.new('RGB', (500, 500)).save(PROCESSED_IMAGE_SAVE_PATH / 'big.png')\n"
        "open(PROCESSED_IMAGE_SAVE_PATH / 'fake.png', 'wb').write(b'not an image')\n"
    )
    r = await pool.run(code)
    assert r.status == "ok", r
    assert [i.name for i in r.images] == ["transformed_image_0.png", "transformed_image_1.png", "transformed_image_2.png"]
    few = await pool.run(
        "from PIL import Image\nImage.new('RGB', (500, 500)).save(PROCESSED_IMAGE_SAVE_PATH / 'big.png')\n"
        "open(PROCESSED_IMAGE_SAVE_PATH / 'fake.png', 'wb').write(b'not an image')\n"
    )
    assert few.images == []
    assert "250000 pixels exceeds the 10000-pixel limit" in few.stderr and "not a readable image" in few.stderr
    small = await pool.run("from PIL import Image\nImage.new('RGB', (40, 30)).save(PROCESSED_IMAGE_SAVE_PATH / 'ok.png')")
    assert Image.open(io.BytesIO(small.images[0].data)).size == (40, 30)


async def test_files_mode_keeps_files_not_variables(pool: SandboxPool) -> None:
    first = await pool.run("x = 1\nopen('notes.txt', 'w').write('kept')", session_id="traj-f", keep="files")
    assert first.status == "ok", first
    second = await pool.run("print(open('notes.txt').read())\nprint(x)", session_id="traj-f", keep="files")
    assert second.stdout == "kept\n" and "NameError" in second.stderr
    other = await pool.run("import os\nprint(os.path.exists('notes.txt'))", session_id="traj-g", keep="files")
    assert other.stdout == "False\n"
    assert (await pool.run("import os\nprint(os.path.exists('notes.txt'))")).stdout == "False\n"
    await pool.release("traj-f")
    await pool.release("traj-g")
    gone = await pool.run("import os\nprint(os.path.exists('notes.txt'))", session_id="traj-f", keep="files")
    assert gone.stdout == "False\n"
    await pool.release("traj-f")


async def test_process_fallback_rejects_forged_and_oversized_frames() -> None:
    """In ``process`` isolation a root call can open the worker's pipes through /proc: the nonce and
    the bounds still keep every later call exact (the worker is replaced)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to reach the worker's pipes")
    attack = (
        "import os, json, struct\n"
        "ppid = os.getppid()\n"
        "body = json.dumps({'status': 'ok', 'stdout': 'FORGED', 'blobs': [], 'nonce': 'guess'}).encode()\n"
        "payloads = [struct.pack('>I', len(body)) + body, b'\\xff\\xff\\xff\\xff' + b'x' * 64]\n"
        "for fd in os.listdir(f'/proc/{ppid}/fd'):\n"
        "    if not os.readlink(f'/proc/{ppid}/fd/{fd}').startswith('pipe:'):\n"
        "        continue  # as root it could write any file the worker has open: the fallback is weak\n"
        "    try:\n"
        "        with open(f'/proc/{ppid}/fd/{fd}', 'wb', buffering=0) as f:\n"
        "            f.write(payloads[int(fd) % 2])\n"
        "    except OSError:\n"
        "        pass\n"
    )
    async with SandboxPool(1, isolation="process") as p:
        t0 = time.monotonic()
        r = await p.run(attack)
        assert "FORGED" not in r.stdout
        for k in range(3):
            ok = await p.run(hostile.innocent(k))
            assert (ok.status, ok.stdout) == ("ok", hostile.innocent_stdout(k)), ok
        assert time.monotonic() - t0 < 60


async def test_a_stateless_folder_reaches_the_next_call_of_its_uid_as_new(pool: SandboxPool) -> None:
    """A stateless uid's tmpfs is emptied and kept for its next call instead of unmounted (an
    unmount waits for an RCU grace period): whatever a call left in or on it (files, a symlink, a
    fifo, a process still writing, a looser mode, an extended attribute, more files than are
    worth deleting one by one) never reaches a later call; a folder not as good as new is replaced."""
    import json

    from sandbox._zygote import STATELESS_UIDS

    hostile_uids: dict[int, str] = {}
    for name in ("LITTER_THE_FOLDER", "LOOSEN_THE_FOLDER", "TAG_THE_FOLDER", "MANY_FILES"):
        r = await pool.run(getattr(hostile, name))
        assert r.status == "ok", r
        hostile_uids[int(r.stdout)] = name
    inodes: dict[int, list[int]] = {}
    for _ in range(2 * STATELESS_UIDS + 3):  # every uid at least twice, the hostile ones included
        r = await pool.run(hostile.LOOK_AT_THE_FOLDER)
        assert r.status == "ok", r
        seen = json.loads(r.stdout)
        assert (seen["entries"], seen["out"], seen["xattrs"], seen["mode"], seen["owner"]) == \
            (["out"], [], [], "0o700", seen["uid"]), seen
        inodes.setdefault(seen["uid"], []).append(seen["out_inode"])
    assert set(hostile_uids) <= set(inodes)
    for uid, name in hostile_uids.items():
        if name != "LITTER_THE_FOLDER":  # that one is as good as new once emptied and its writer dead
            assert inodes[uid][0] == 2, (name, inodes[uid])  # a fresh folder, not the one it left
    # the innocent folders were emptied and kept: their uid's next call found an inode used before
    assert any(seen[-1] > 2 for uid, seen in inodes.items() if uid not in hostile_uids), inodes
    await _innocents_are_exact(pool)
