# Two commands set up and use everything on a fresh machine:
#   make run     - answers a prompt with the embedded default model
#   make test    - runs the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROMPT ?= Set an alarm for 7:30 tomorrow morning
# Distributions installed beside the core (each is its own plugin package).
PLUGINS := -e ./quant -e ./plugins/cloud -e ./plugins/cpu_neon -e ./plugins/mlx_ref -e ./plugins/metal

STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml requirements-test.txt Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e ".[server]" $(PLUGINS) -r requirements-test.txt
	touch $(STAMP)

.PHONY: install run chat test
install: $(STAMP)

run: $(STAMP)
	$(BIN)/cactus run --tools examples/phone_tools.json --prompt "$(PROMPT)"

chat: $(STAMP)
	$(BIN)/cactus run --tools examples/phone_tools.json

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)
