PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-browser test-slurm lint bench clean

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

test: $(STAMP) lint
	$(BIN)/pytest

# The viewer in headless Chromium (Debian's `chromium` package); fails instead of skipping without it.
test-browser: $(STAMP)
	FASTEVAL_REQUIRE_BROWSER=1 $(BIN)/pytest tests/view/test_browser.py

test-slurm: $(STAMP)
	$(BIN)/pytest tests/slurm -v

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py

clean:
	rm -rf $(VENV) runs
