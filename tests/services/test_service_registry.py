"""The service registry loads on a miss, like suites and tools: nothing has to be imported first for
its side effect, and looking a service up imports only the module that defines it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fasteval.services.registry import SERVICES, start_services


def fresh(code: str) -> str:
    """Run ``code`` in a new interpreter (this one has imported everything already)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_service_is_found_without_importing_its_module_first() -> None:
    out = fresh(
        "import sys\n"
        "from fasteval.services.registry import SERVICES\n"
        "before = sorted(m for m in sys.modules if m.startswith(('fasteval.services.', 'fasteval.tools.')))\n"
        "print(before)\n"
        "print(SERVICES['limiters'].name, 'fasteval.services.cache_http' in sys.modules)\n")
    assert out.splitlines() == ["['fasteval.services.registry']", "limiters False"]


def test_a_benchmarks_own_tool_is_known_before_any_suite_is_imported() -> None:
    out = fresh(
        "import sys\n"
        "from fasteval.tools.base import TOOLS\n"
        "print('image_search_tool' in TOOLS, 'fasteval.suites.base' in sys.modules)\n"
        "print(TOOLS['image_search_tool'].__module__)\n")
    assert out.splitlines() == ["True False", "fasteval.suites.vistahop.tools"]


async def test_the_limiters_start_and_an_unknown_service_is_named() -> None:
    services, closers = await start_services({"limiters"}, {})
    try:
        assert set(services) == {"limiters"}
    finally:
        for close in closers:
            await close()
    with pytest.raises(KeyError, match="unknown service 'nosuch'; known: .*'limiters'.*'sandbox'"):
        await start_services({"nosuch"}, {})
    assert {"cache", "http", "limiters", "sandbox", "browser"} <= set(SERVICES)
