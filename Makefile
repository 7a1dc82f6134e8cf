# pyrecall — `make demo` runs the main job end to end, `make test` the test suite.
# Each target does its own set-up (a .venv with everything installed, the embedded
# PostgreSQL); `make help` lists every target.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYRECALL := $(BIN)/pyrecall

.DEFAULT_GOAL := help
.PHONY: help install demo test lint

# DBA targets (db-up, index, tune, explain, stats, ...) live in mk/dba.mk
-include mk/*.mk

help:  ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, pinned to the CPU build (a plain `torch` requirement would pull CUDA)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[local,test,bench,mcp]'
	touch $@

install: $(STAMP)  ## Create .venv and install pyrecall with everything it needs

demo: $(STAMP)  ## The main job, end to end, on the embedded database
	$(PYRECALL) db start
	$(PYRECALL) migrate
	$(BIN)/python examples/demo.py

test: $(STAMP)  ## Run the test suite against a throwaway embedded PostgreSQL
	$(BIN)/python -m pytest -q

lint: $(STAMP)  ## ruff, and a parse + safety check of every SQL file
	$(BIN)/ruff check pyrecall tests bench examples
	$(BIN)/python -m pyrecall._sqlcheck
