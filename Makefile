# eventatlas: two commands matter.
#   make demo   - create the environment, then run every method's quick form on the shipped samples
#                 (in its own data root, data/demo, with its own warehouse and report) and print a summary
#   make test   - create the environment, then run the test suite (CI calls exactly this)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test serve stop-serve bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# pinned CPU torch first: an unpinned torch would pull GBs of CUDA wheels
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/eventatlas demo

test: $(STAMP)
	$(PY) -m pytest -q

serve: $(STAMP)
	bash scripts/serve.sh

stop-serve:
	bash scripts/serve.sh stop

# Speed/memory benchmarks: each measures a ratio against its baseline in the same run and
# records it as a run (published to the warehouse table `benchmarks`; `eventatlas report` shows the
# latest ratios and their history). The 40k/118k clustering cases need ~13 GB free:
#   $(PY) benchmarks/bench_cluster.py exact40k | manifold20k | big-exact | big-manifold
bench: $(STAMP)
	$(PY) benchmarks/bench_encode.py
	$(PY) benchmarks/bench_cluster.py small
	$(PY) benchmarks/bench_wiki.py
	$(PY) benchmarks/bench_train.py

clean:
	rm -rf data warehouse/eventatlas.duckdb .pytest_cache
