# One-command entry points. `make run`: set up and run the embedded default to the report; it
# needs Python 3.11 and no root (the run uses no system package). `make test`: set up, install
# the Debian packages the tests need (as root), and run the whole test suite (what CI runs).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
SNAKEMAKE := $(VENV)/bin/snakemake
CORES ?= 2
# Hub caches stay inside the project, never in the user's home. The token of
# `huggingface-cli login`, under the HF home the user had, stays found through HF_TOKEN_PATH
# unless HF_TOKEN or HF_TOKEN_PATH is set (as reprolm.hub_token does for a direct snakemake).
USER_HF_HOME := $(or $(HF_HOME),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/huggingface)
ifeq ($(HF_TOKEN)$(HF_TOKEN_PATH)$(wildcard $(USER_HF_HOME)/token),$(USER_HF_HOME)/token)
export HF_TOKEN_PATH := $(USER_HF_HOME)/token
endif
export HF_HOME := $(CURDIR)/resources/hf_home
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM := false
# Waiting OpenMP threads sleep instead of spinning: with more busy threads than cores (jobs side
# by side, the test suite's processes) torch's spinning threads took three times the CPU.
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: setup setup-gpu system-deps run report test test-fast test-rerun-scope lint format clean bench gpu-smoke-wheels slurm-profile docs

# Packages are installed with their bytecode compiled: where the environment sets
# PYTHONDONTWRITEBYTECODE (as container images often do), Python never caches what it compiles,
# and every job and test process would compile pandas, numpy and transformers from source.
# requirements/cpu-lock.txt pins every package (the GPU set's versions: requirements/lock.sh), torch
# as its CPU build, installed first from where requirements/torch-cpu-wheels.sh says (anything else
# pulls CUDA wheels). Installed through uv (on PATH, else the locked uv), pip where uv cannot be had.
TORCH_CPU_WHEELS ?= $(shell bash requirements/torch-cpu-wheels.sh)
UV_LOCKED = $(shell grep -o '^uv==[^ ]*' requirements/cpu-lock.txt)
# uv applies requirements/overrides.txt; pip cannot, so it installs the complete lock as it is.
define install_packages
	@uv=$$(command -v uv || command -v $(VENV)/bin/uv || { $(PIP) install -q $(UV_LOCKED) && echo $(VENV)/bin/uv; }); \
	  if [ -n "$$uv" ]; then $$uv pip install -q --compile-bytecode --override requirements/overrides.txt --python $(PY) $(1); \
	  else $(PIP) install -q --no-deps $(1); fi
endef

# The stamp is named by the content of what it installs, so a venv made from another lock (an
# older checkout's, or one copied in with its stamp) is brought to this one: a date would not.
INSTALL_KEY := $(shell cat pyproject.toml requirements/cpu-lock.txt requirements/overrides.txt | sha256sum | cut -c1-16)
INSTALLED := $(VENV)/.installed-$(INSTALL_KEY)

$(INSTALLED):
	python3 -m venv $(VENV)
	rm -f $(VENV)/.installed $(VENV)/.installed-*
	$(call install_packages,--find-links $(TORCH_CPU_WHEELS) torch==2.13.0+cpu)
	$(call install_packages,--find-links $(TORCH_CPU_WHEELS) -r requirements/cpu-lock.txt)
	$(PIP) install -q --no-deps -e .
	$(PY) -m compileall -q src workflow/scripts
	touch $@

setup: $(INSTALLED)

# GPU clusters (Linux x86_64, Python 3.11, a driver for CUDA 13): requirements/gpu-lock.txt, every
# package pinned, so the torch installed is the one vLLM pins (PyPI's Linux torch is the CUDA
# build) and the rest are the CPU set's versions. A venv from `make setup` would keep its CPU
# torch (same version), so it is refused.
# FLASH_ATTN=1 adds flash-attn, built against that torch (a prebuilt wheel from its GitHub
# release when one matches, else compiled with nvcc); reprolm does not ask for it, models whose
# own code imports flash_attn do.
FLASH_ATTN ?= 0
setup-gpu:
	@$(PY) -c "import sys, torch; sys.exit(3 if torch.version.cuda is None else 0)" 2>/dev/null; \
	  if [ $$? = 3 ]; then echo "$(VENV) has a CPU build of torch: make setup-gpu VENV=.venv-gpu"; exit 1; fi
	python3 -m venv $(VENV)
	$(call install_packages,-r requirements/gpu-lock.txt)
	$(PIP) install -q --no-deps -e .
ifeq ($(FLASH_ATTN),1)
	$(PIP) install -q -c requirements/gpu-constraints.txt --no-build-isolation flash-attn
endif
	bash scripts/pip-check.sh $(PY)
	$(PY) -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"

# Debian packages only the tests need: a real single-node SLURM for the cluster tests, Chromium
# for the report's browser test. Installed as root; elsewhere it says which are missing.
system-deps:
	@bash scripts/install-system-deps.sh

run: setup
	$(SNAKEMAKE) --cores $(CORES) --profile profiles/default
	$(SNAKEMAKE) --cores $(CORES) --profile profiles/default --report results/report.html

# `snakemake --profile slurm` from then on (prints the profile name it registered).
slurm-profile:
	@bash scripts/register-slurm-profile.sh

test: setup system-deps
	PYTHON=$(PY) scripts/run-tests.sh

# The rerun scope of every leaf key of the default config, and docs/rerun-scope.md checked
# against it, alone (make test runs it too).
test-rerun-scope: setup
	$(PY) -m pytest -q -m key_scan

# The fast layer: no Snakemake pipeline, no torchrun/DeepSpeed, no SLURM, no clean-venv install,
# nothing marked slow.
test-fast: setup
	$(PY) -m pytest -q -m "not workflow and not deepspeed and not slurm and not install and not slow"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(SNAKEMAKE) --lint
	$(VENV)/bin/snakefmt --check workflow

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
	$(VENV)/bin/snakefmt workflow

bench: setup
	$(PY) bench/run_bench.py

# What bench/gpu_smoke carries to a GPU machine whose image lacks Snakemake, TRL, datasets and
# lm-eval: the wheels bench/gpu_smoke/wheels.txt lists, for its Python 3.12, into .gpu-wheels/.
gpu-smoke-wheels:
	bash bench/gpu_smoke/wheels.sh

# The documentation site (docs/, mkdocs.yml) into site/: the configuration keys page written from
# the config schema, then a strict build (a broken link or a page outside the navigation fails it).
docs: setup
	$(VENV)/bin/reprolm config-docs
	$(VENV)/bin/mkdocs build --strict

clean:
	rm -rf results resources/models resources/raw logs benchmarks .snakemake
