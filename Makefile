# deltamem: two commands set up everything from nothing (see README).
#   make demo   virtualenv, llama.cpp engine, embedded model + embeddings, then the demo
#   make test   the same setup plus the train extra, then the docs check, ruff, mypy (the
#               package), the import contracts (lint-imports) and the test suite
#   make docs   the documentation site (mkdocs --strict) into site/
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
EXTRAS ?= local,tiny,server,postgres,bench,mem0,langgraph,dev
# llama-cpp-python ships only as source: build it portable (not for this CPU only).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: setup setup-train demo test lint docs docs-check bench-search bench-write clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -e ".[$(EXTRAS)]"
	$(PY) -m deltamem setup
	touch $@

setup: $(VENV)/.installed

# The train extra (GRPO, GGUF export): torch 2.13.0, the CPU build pip takes from
# this machine's disk, transformers, trl, peft, gguf, ... (~1 min, ~1.5 GB). Only the
# tests and `deltamem train grpo` need it, so `make demo` does without.
$(VENV)/.train-installed: $(VENV)/.installed
	$(PIP) install -e ".[$(EXTRAS),train]"
	touch $@

setup-train: $(VENV)/.train-installed

demo: setup
	$(PY) -m deltamem demo

# The docs extra alone (mkdocs, its theme and include-markdown): no model, no engine, so
# `make docs` works before `make setup` (a venv is made if there is none).
$(VENV)/.docs-installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -e ".[docs]"
	touch $@

# The site, with every warning an error: a broken link, a page missing from mkdocs.yml's
# nav, or a nav entry with no page fails the build. (Not --quiet: it hides the warnings
# from --strict too, and the build then passes whatever they say.)
docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# What `make test` runs first (seconds): the site builds, and docs/results.md is what
# docs/results/*.json render (python benchmarks/results_page.py writes both).
docs-check: docs
	$(PY) benchmarks/results_page.py --check

test: setup setup-train docs-check
	$(VENV)/bin/ruff check deltamem tests benchmarks examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check deltamem tests benchmarks examples
	$(VENV)/bin/ruff format --check deltamem tests benchmarks examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench-search: setup
	$(PY) benchmarks/search_latency.py --sizes 1000,10000,100000 --json

bench-write: setup
	$(PY) benchmarks/write_cost.py --data ../shared/data/halumem/pilot_slice_user3.jsonl --sessions 10 --json

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
