# The two commands (see README.md): `make demo` and `make test`. Each installs what it
# needs first into a virtual environment of its own ($(VENV); a stock Debian python3
# refuses pip installs into itself, PEP 668), plus bubblewrap and the Debian packages,
# so a fresh Debian machine needs nothing else. PYTHON is the interpreter the venv is
# made from.
PYTHON ?= python3
VENV ?= .venv
EXTRAS ?=
PY := $(VENV)/bin/python
# Recipes see the venv's commands (vera-env, pytest, ruff, lint-imports) first.
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: install demo test lint docs bench mutation

install:
	PYTHON=$(PYTHON) VERA_VENV=$(VENV) VERA_EXTRAS=$(EXTRAS) bash scripts/install.sh

demo: install
	$(VENV)/bin/vera-env demo

test: EXTRAS = dev,training,ray,serve,docs,skyrl
# The suite in two processes (pytest-xdist: most tests wait on sandboxes and servers, so
# two share two cores well), then the few `serial` tests alone (pyproject.toml, markers).
test: install
	$(MAKE) --no-print-directory lint
	$(PY) -m pytest -q -n 2 --dist worksteal -m "not serial" --durations=30
	$(PY) -m pytest -q -m serial --durations=5

# Static checks (configured in pyproject.toml), about a minute cold: ruff, mypy over
# vera_env (its policies and training included), and the import contracts (layers, no
# cycles, forbidden imports). Doctests, private-name imports and "Gymnasium untouched"
# are tests, run by pytest.
lint:
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

# The documentation site (docs/, mkdocs.yml) into site/, warnings as errors; the test
# suite builds it too (tests/docs/test_docs_build.py) and runs its code blocks.
docs:
	$(PY) -m mkdocs build --strict

bench: EXTRAS = dev,ray,serve
bench: install
	$(PY) benchmarks/harness_overhead.py
	$(PY) benchmarks/sandbox_latency.py --breakdown
	$(PY) benchmarks/staging.py
	$(PY) benchmarks/observation_size.py
	$(PY) benchmarks/episodes_per_minute.py
	$(PY) benchmarks/serve_load.py --out benchmarks/results/serve_load_openenv.json

# Test strength on the modules that turn text into reward (tens of minutes; not in CI).
mutation: EXTRAS = dev
mutation: install
	nice -n 15 $(PY) benchmarks/mutation.py
