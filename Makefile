# The course's commands. `make lab` and `make test` each set everything up first.
#
#   make lab       set up, then open the course in JupyterLab
#   make test      set up, then run the whole test suite
#   make quick     set up, then run the fast tests only (no notebooks, nbgrader or browser)
#   make release   regenerate release/ from source/ with nbgrader
#   make autograde LESSON=01_data_parallel   autograde a lesson's submissions in parallel
#                  (WORKERS=N to choose how many students at once)
#   make sheets    regenerate the cheat sheets in notebooks/cheatsheets/ from grader/content
#   make anki      export every topic's cards and questions to notebooks/anki/*.apkg
#   make docs      build the course site into build/site/html (guides, lessons run for their
#                  outputs, cheat sheets, measurements), offline; SITE_ARGS="--execute 00_foundations"
#                  runs one lesson only, SITE_ARGS="--execute" none
#   make gpu-check on a machine with GPUs: run and autograde every lesson's solution, run the
#                  tests marked gpu, measure; report in docs/gpu/ (tests/gpu_check.py;
#                  GPU_CHECK_ARGS="--lessons 02_ddp" for one lesson, "--quick" for the CPU form)
#
# Set-up makes a virtual environment in .venv and installs torch first (`make torch`,
# below: an installed one is kept; without a GPU, a CPU build), then the course.
#
# Every recipe runs as an activated environment would: .venv/bin comes first on PATH,
# so commands that tools run by name (nbgrader runs `alembic`) are the environment's own.

VENV ?= .venv
PYTHON ?= python3
SYSTEM_SITE ?= 1
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
export VIRTUAL_ENV := $(abspath $(VENV))

.PHONY: setup torch lab test quick release autograde sheets anki browser gpu-check docs
setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory torch
	$(PY) -m pip install -e ".[test,docs]"
	@# JupyterLab's defaults for the course: no news pop-up or update check over the widgets
	mkdir -p $(VENV)/share/jupyter/lab/settings && cp hub/lab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

# torch before the course, so pip never pulls CUDA wheels for a machine without a GPU:
# an installed torch is kept; with nvidia-smi, the default (CUDA) build; otherwise
# $(TORCH_SPEC) from TORCH_INDEX_URL if set, else from PyTorch's CPU index when it answers,
# else from pip's default index (a CPU build on the course machines), saying which.
torch:
	@test -x $(PY) || $(PYTHON) -m venv $(if $(filter 1,$(SYSTEM_SITE)),--system-site-packages) $(VENV)
	@if $(PY) -c "import torch" 2>/dev/null; then \
		echo "torch: using the installed $$($(PY) -c 'import torch; print(torch.__version__)')"; \
	elif command -v nvidia-smi >/dev/null 2>&1; then \
		echo "torch: a GPU (nvidia-smi): the default index's CUDA build"; \
		$(PY) -m pip install torch; \
	elif [ -n "$(TORCH_INDEX_URL)" ]; then \
		echo "torch: $(TORCH_SPEC) from TORCH_INDEX_URL, $(TORCH_INDEX_URL)"; \
		$(PY) -m pip install --index-url "$(TORCH_INDEX_URL)" "$(TORCH_SPEC)"; \
	elif $(PY) -c "import urllib.request as u; u.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=10)" 2>/dev/null; then \
		echo "torch: $(TORCH_SPEC) from PyTorch's CPU index, $(TORCH_CPU_INDEX)"; \
		$(PY) -m pip install --index-url "$(TORCH_CPU_INDEX)" "$(TORCH_SPEC)"; \
	else \
		echo "torch: PyTorch's CPU index ($(TORCH_CPU_INDEX)) cannot be reached: $(TORCH_SPEC) from pip's default index"; \
		$(PY) -m pip install "$(TORCH_SPEC)"; \
	fi

# Browser tests drive Debian's Chromium; install it where we may (root with apt).
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	else echo "no /usr/bin/chromium: browser tests will be skipped (install chromium to run them)"; fi

lab: setup
	$(PY) -m jupyterlab --notebook-dir=. $(if $(filter 0,$(shell id -u)),--allow-root)

# Two lanes (pytest-xdist), each taking a whole test file at a time: the nbgrader round trip
# (about half the suite) runs in one while the rest of the suite runs in the other.
# LANES= runs one lane.
LANES ?= -n 2 --dist loadfile

test: setup browser
	$(PY) -m pytest $(LANES) $(PYTEST_ARGS)

quick: setup
	$(PY) -m pytest -m "not slow" $(LANES) $(PYTEST_ARGS)

release: setup
	for dir in source/*/; do nbgrader generate_assignment "$$(basename $$dir)" --force; done

autograde: setup
	@test -n "$(LESSON)" || { echo "usage: make autograde LESSON=01_data_parallel [WORKERS=N]"; exit 2; }
	$(PY) -m grader.grading.autograde $(LESSON) $(if $(WORKERS),--workers $(WORKERS))

sheets: setup
	$(PY) -m grader.study.sheets

anki: setup
	$(PY) -m grader.study.anki --out notebooks/anki
	$(PY) -m grader.study.anki --each --out notebooks/anki

gpu-check: setup
	$(PY) tests/gpu_check.py $(GPU_CHECK_ARGS)

docs: setup
	$(PY) docs/build_site.py $(if $(SITE_ARGS),$(SITE_ARGS),--execute all)
