# The two commands (see README.md): `make demo` and `make test`. Each installs what it
# needs first (bubblewrap and python packages), so a fresh Debian machine needs nothing else.
PYTHON ?= python3
EXTRAS ?= dev

.PHONY: install demo test lint docs bench mutation

install:
	PYTHON=$(PYTHON) VERA_EXTRAS=$(EXTRAS) bash scripts/install.sh

demo: install
	vera-env demo

test: EXTRAS = dev,training,ray,serve,docs,skyrl
test: install
	$(MAKE) --no-print-directory lint PYTHON=$(PYTHON)
	$(PYTHON) -m pytest -q

# Static checks (configured in pyproject.toml), about a minute cold: ruff, mypy over
# vera_env and policies, and the import contracts (layers, no cycles, forbidden imports).
# Doctests, private-name imports and "Gymnasium untouched" are tests, run by pytest.
lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy
	lint-imports

# The documentation site (docs/, mkdocs.yml) into site/, warnings as errors; the test
# suite builds it too (tests/docs/test_docs_build.py) and runs its code blocks.
docs:
	$(PYTHON) -m mkdocs build --strict

bench: EXTRAS = dev,ray,serve
bench: install
	$(PYTHON) benchmarks/harness_overhead.py
	$(PYTHON) benchmarks/sandbox_latency.py --breakdown
	$(PYTHON) benchmarks/staging.py
	$(PYTHON) benchmarks/observation_size.py
	$(PYTHON) benchmarks/episodes_per_minute.py
	$(PYTHON) benchmarks/serve_load.py --out benchmarks/results/serve_load_openenv.json

# Test strength on the modules that turn text into reward (tens of minutes; not in CI).
mutation: install
	nice -n 15 $(PYTHON) benchmarks/mutation.py
