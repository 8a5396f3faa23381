# One-command entry points. `make run`: set up and run the embedded default to the report.
# `make test`: set up and run the whole test suite (what CI runs).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
SNAKEMAKE := $(VENV)/bin/snakemake
CORES ?= 2
# Hub caches stay inside the project, never in the user's home.
export HF_HOME := $(CURDIR)/resources/hf_home
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup system-deps run report test test-fast lint format clean bench slurm-profile

$(VENV)/.installed: pyproject.toml requirements/base.txt requirements/dev.txt requirements/cpu-constraints.txt
	python3 -m venv $(VENV)
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c requirements/cpu-constraints.txt -r requirements/base.txt -r requirements/dev.txt
	$(PIP) install -q -c requirements/cpu-constraints.txt --no-deps -e .
	touch $@

setup: system-deps $(VENV)/.installed

# Debian packages the tests need (a real single-node SLURM for the cluster tests).
system-deps:
	@bash scripts/install-system-deps.sh

run: setup
	$(SNAKEMAKE) --cores $(CORES) --profile profiles/default
	$(SNAKEMAKE) --cores $(CORES) --profile profiles/default --report results/report.html

# `snakemake --profile slurm` from then on (prints the profile name it registered).
slurm-profile:
	@bash scripts/register-slurm-profile.sh

test: setup
	PYTHON=$(PY) scripts/run-tests.sh

# The fast layer: no Snakemake pipeline, no torchrun/DeepSpeed, no SLURM (a few minutes).
test-fast: setup
	$(PY) -m pytest -q -m "not workflow and not deepspeed and not slurm"

lint: setup
	$(SNAKEMAKE) --lint
	$(VENV)/bin/snakefmt --check workflow

format: setup
	$(VENV)/bin/snakefmt workflow

bench: setup
	$(PY) bench/run_bench.py

clean:
	rm -rf results resources/models resources/raw logs benchmarks .snakemake
