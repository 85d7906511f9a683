# The two commands (see README.md): `make demo` and `make test`. Each installs what it
# needs first (bubblewrap and python packages), so a fresh Debian machine needs nothing else.
PYTHON ?= python3
EXTRAS ?= dev

.PHONY: install demo test bench

install:
	PYTHON=$(PYTHON) VERA_EXTRAS=$(EXTRAS) bash scripts/install.sh

demo: install
	vera-env demo

test: EXTRAS = dev,training,ray,serve
test: install
	$(PYTHON) -m pytest -q

bench: EXTRAS = dev,ray,serve
bench: install
	$(PYTHON) benchmarks/harness_overhead.py
	$(PYTHON) benchmarks/sandbox_latency.py --breakdown
	$(PYTHON) benchmarks/staging.py
	$(PYTHON) benchmarks/observation_size.py
	$(PYTHON) benchmarks/episodes_per_minute.py
	$(PYTHON) benchmarks/serve_load.py --out benchmarks/results/serve_load_openenv.json
