"""Run the README's first recipe as written, against the loopback hub, in a checkout.

    python tests/suites/hub/readme_check.py [CHECKOUT]     # default: this checkout

After ``make demo`` on a fresh clone this starts hub_server.FakeHub with a synthetic TIR-Bench
release, points HF_ENDPOINT at it, and runs each command of the first ``sh`` block under
"## Recipes" in CHECKOUT/README.md, in CHECKOUT, with CHECKOUT/.venv/bin first on PATH. It prints
each command with its exit code and exits 1 if one fails. tests/suites/hub/test_readme_recipe.py
runs it on a copy of the configs in a temporary folder.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import hub_server  # noqa: E402


def first_recipe(readme: str) -> list[str]:
    """The commands of the first ``sh`` block under "## Recipes" (comments and blank lines dropped)."""
    recipes = readme.split("\n## Recipes", 1)[1]
    block = re.search(r"```sh\n(.*?)```", recipes, re.S)
    if block is None:
        raise SystemExit("README.md: no sh block under ## Recipes")
    commands = []
    for line in block.group(1).splitlines():
        command = line.split("#", 1)[0].strip()
        if command:
            commands.append(command)
    return commands


def run_recipe(checkout: Path, workdir: Path | None = None, timeout_s: float = 900) -> list[tuple[str, int, str]]:
    """(command, exit code, output tail) for each command, run in ``workdir`` (default the checkout)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    hub = hub_server.FakeHub()
    hub.add_dataset("Agents-X/TIR-Bench", hub_server.synthetic_tirbench())
    asyncio.run_coroutine_threadsafe(hub.__aenter__(), loop).result(30)
    bindir = checkout / ".venv" / "bin"
    env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("HF_HUB_OFFLINE", None)
    results = []
    try:
        for command in first_recipe((checkout / "README.md").read_text()):
            done = subprocess.run(command, shell=True, cwd=workdir or checkout, env=env, capture_output=True,
                                  text=True, timeout=timeout_s)
            results.append((command, done.returncode, (done.stdout + done.stderr)[-1500:]))
            if done.returncode != 0:
                break
    finally:
        asyncio.run_coroutine_threadsafe(hub.__aexit__(None, None, None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    return results


def main() -> None:
    checkout = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[3]).resolve()
    results = run_recipe(checkout)
    for command, code, tail in results:
        print(f"[{code}] {command}")
        if code != 0:
            print(tail)
    sys.exit(0 if results and all(code == 0 for _, code, _ in results) else 1)


if __name__ == "__main__":
    main()
