"""Pool behaviour: inputs, outputs and their order, sessions, fidelities, progress counts."""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from PIL import Image

from sandbox import SandboxPool

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


def _image_bytes(fmt: str, size: tuple[int, int] = (40, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 30, 60)).save(buf, fmt)
    return buf.getvalue()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[SandboxPool]:
    async with SandboxPool(2) as p:
        yield p


async def test_trivial_call_returns_stdout(pool: SandboxPool) -> None:
    r = await pool.run("print(6 * 7)")
    assert r.status == "ok" and r.stdout == "42\n" and r.stderr == ""


async def test_exception_returns_traceback_of_model_code_only(pool: SandboxPool) -> None:
    r = await pool.run("x = 1\n1 / 0")
    assert r.status == "error"
    assert r.error == "ZeroDivisionError: division by zero"
    assert 'File "<llm_code>", line 2' in r.stderr
    assert "sandbox/" not in r.stderr  # the worker's own frames are not shown


async def test_inputs_keep_bytes_and_get_stable_names(pool: SandboxPool) -> None:
    png, jpg = _image_bytes("PNG"), _image_bytes("JPEG")
    code = (
        "import hashlib, os\n"
        "for n in sorted(os.listdir('.')):\n"
        "    if n.startswith('input_'): print(n, hashlib.sha256(open(n,'rb').read()).hexdigest())\n"
        "print(INPUT_IMAGES)"
    )
    r = await pool.run(code, images=[png, jpg])
    assert r.input_names == ["input_0.png", "input_1.jpg"]
    lines = r.stdout.splitlines()
    assert lines[0] == f"input_0.png {hashlib.sha256(png).hexdigest()}"
    assert lines[1] == f"input_1.jpg {hashlib.sha256(jpg).hexdigest()}"
    assert lines[2] == "['input_0.png', 'input_1.jpg']"


_SAVE_MANY = (
    "from PIL import Image\n"
    "im = Image.open('input_0.png')\n"
    "for name in ['transformed_image_10.png', 'transformed_image_2.png', 'other.jpg', 'notes.txt']:\n"
    "    (im.save(PROCESSED_IMAGE_SAVE_PATH / name) if name.endswith(('png', 'jpg'))\n"
    "     else (PROCESSED_IMAGE_SAVE_PATH / name).write_text('x'))\n"
    "im.save('transformed_image_1.png')\n"
)


async def test_fixed_outputs_include_output_folder_images_sorted_by_index(pool: SandboxPool) -> None:
    r = await pool.run(_SAVE_MANY, images=[_image_bytes("PNG")], fidelity="fixed")
    assert r.status == "ok", r.stderr
    assert [i.name for i in r.images] == [
        "transformed_image_1.png", "transformed_image_2.png", "transformed_image_10.png", "other.jpg",
    ]  # fmt: skip
    assert r.images[0].path == "/sandbox/work/transformed_image_1.png"
    assert r.images[1].path == "/sandbox/work/out/transformed_image_2.png"
    assert Image.open(io.BytesIO(r.images[1].data)).size == (40, 30)


async def test_reference_outputs_follow_harness_rule(pool: SandboxPool) -> None:
    code = "from PIL import Image as P\n" + _SAVE_MANY.replace("Image.open", "P.open")
    r = await pool.run(code, images=[_image_bytes("PNG")], fidelity="reference")
    assert r.status == "ok", r.stderr
    assert [i.name for i in r.images] == ["transformed_image_2.png", "transformed_image_10.png"]


async def test_reference_ignores_overwrite_fixed_reports_it(pool: SandboxPool) -> None:
    save = "from PIL import Image as P\nP.new('L', (4, 4), {v}).save(PROCESSED_IMAGE_SAVE_PATH / 'transformed_image_0.png')"
    for fidelity, expected in (("reference", []), ("fixed", ["transformed_image_0.png"])):
        sid = f"overwrite-{fidelity}"
        first = await pool.run(save.format(v=1), session_id=sid, fidelity=fidelity)  # type: ignore[arg-type]
        assert [i.name for i in first.images] == ["transformed_image_0.png"]
        again = await pool.run(save.format(v=2), session_id=sid, fidelity=fidelity)  # type: ignore[arg-type]
        assert [i.name for i in again.images] == expected
        await pool.release(sid)


async def test_stateless_calls_share_nothing(pool: SandboxPool) -> None:
    await pool.run("x = 41\nopen('left.txt', 'w').write('x')")
    r = await pool.run("import os\nprint(os.path.exists('left.txt'))\nprint(x)")
    assert r.stdout == "False\n" and r.status == "error" and "NameError" in r.stderr


async def test_session_keeps_variables_and_files_until_released(pool: SandboxPool) -> None:
    await pool.run("x = 41\nopen('notes.txt', 'w').write('kept')", session_id="job-a")
    await pool.run("y = 1", session_id="job-b")
    await pool.run("z = 0")  # stateless calls in between must not disturb the session
    r = await pool.run("print(x + 1, open('notes.txt').read())", session_id="job-a")
    assert r.stdout == "42 kept\n", r.stderr
    other = await pool.run("print(x)", session_id="job-b")
    assert other.status == "error" and "NameError" in other.stderr
    assert pool.stats()["sessions"] == 2
    await pool.release("job-a")
    await pool.release("job-b")
    gone = await pool.run("import os\nprint(os.path.exists('notes.txt'))\nprint(x)", session_id="job-a")
    assert gone.stdout == "False\n" and "NameError" in gone.stderr
    await pool.release("job-a")
    assert pool.stats()["sessions"] == 0


@pytest.mark.parametrize("snippet", ["print(round(1.5))", "print(sorted([2, 1]))", "class A:\n    pass", "open('f', 'w')"])
async def test_reference_builtins_are_restricted_fixed_are_full(pool: SandboxPool, snippet: str) -> None:
    ref = await pool.run(snippet, fidelity="reference")
    assert ref.status == "error" and "NameError" in ref.stderr
    fixed = await pool.run(snippet, fidelity="fixed")
    assert fixed.status == "ok", fixed.stderr


async def test_reference_separate_globals_and_locals_pitfall(pool: SandboxPool) -> None:
    code = "y = 2\ndef f():\n    return y\nprint(f())"
    assert "NameError" in (await pool.run(code, fidelity="reference")).stderr
    assert (await pool.run(code, fidelity="fixed")).stdout == "2\n"


async def test_reference_prebound_image_open_fails_like_real_pil(pool: SandboxPool) -> None:
    r = await pool.run("img = Image.open('input_0.png')", images=[_image_bytes("PNG")], fidelity="reference")
    assert r.status == "error"
    assert "AttributeError: type object 'Image' has no attribute 'open'" in r.stderr
    names = await pool.run(
        "plt.show()\nImage().show()\nprint(PROCESSED_IMAGE_SAVE_PATH.__class__.__name__, np.__name__, cv2.__name__)",
        fidelity="reference",
    )
    assert names.status == "ok", names.stderr
    assert names.stdout == "PosixPath numpy cv2\n"


async def test_reference_interpreter_has_no_save_path(pool: SandboxPool) -> None:
    r = await pool.run("print(np.arange(3).sum())\nprint(PROCESSED_IMAGE_SAVE_PATH)", fidelity="reference", tool="interpreter")
    assert r.stdout == "3\n" and "NameError" in r.stderr


async def test_stats_count_in_flight_and_waiting(pool: SandboxPool) -> None:
    calls = [asyncio.create_task(pool.run("import time\ntime.sleep(1.5)")) for _ in range(4)]
    seen: dict[str, int] = {}
    for _ in range(100):
        await asyncio.sleep(0.02)
        seen = pool.stats()
        if seen["in_flight"] == 2 and seen["waiting"] == 2:
            break
    assert seen["in_flight"] == 2 and seen["waiting"] == 2
    assert all(r.ok for r in await asyncio.gather(*calls))
    assert pool.stats()["in_flight"] == 0 and pool.stats()["waiting"] == 0


async def test_cancelled_call_does_not_desynchronise_the_worker(pool: SandboxPool) -> None:
    task = asyncio.create_task(pool.run("import time\ntime.sleep(30)\nprint('late')"))
    for _ in range(100):
        await asyncio.sleep(0.02)
        if pool.stats()["in_flight"]:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    results = await asyncio.gather(*(pool.run(f"print({i})") for i in range(4)))
    assert [r.stdout for r in results] == ["0\n", "1\n", "2\n", "3\n"]


async def test_pool_runs_under_uvloop() -> None:
    import uvloop

    async def body() -> str:
        async with SandboxPool(1) as p:
            return (await p.run("print('uv')")).stdout

    assert await asyncio.to_thread(uvloop.run, body()) == "uv\n"


async def test_a_jailed_workers_waiting_shim_keeps_no_copy_of_the_imports(pool: SandboxPool) -> None:
    """The process outside the worker's namespaces only waits for it; it used to keep its own
    copy of numpy, PIL, OpenCV and matplotlib's memory (RSS ~220 MB per worker)."""
    if pool.isolation != "jail":
        pytest.skip("namespaces unavailable: without the jail there is no shim")
    await pool.run("x = 1")
    live = [w for w in pool._slots if w is not None]  # an earlier test's retired worker may be restarting
    assert live
    for worker in live:
        status = await asyncio.to_thread(Path(f"/proc/{worker.proc.pid}/status").read_text)
        rss_kb = int(status.split("VmRSS:")[1].split()[0])
        assert rss_kb < 40 * 1024, status
