# The two entry points a newcomer needs: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev,cpsat]'
	touch $(STAMP)

.PHONY: demo test test-slow lint

demo: $(STAMP)
	$(BIN)/optsched demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m slow

lint: $(STAMP)
	$(BIN)/ruff check optsched tests
