# The two entry points a newcomer needs: `make demo` and `make test`.
#
# The repo's own environments are locked: `.venv` holds exactly what `uv.lock` says with every
# extra the tests need, `.venv-demo` the same lock with no extra at all (only what `optsched demo`
# runs: numpy, numba, HiGHS, matplotlib), so a cold `make demo` does not install the test, docs
# and solver extras (pyproject.toml keeps version ranges for library users). All that is needed is `python3` (>= 3.11, with venv and
# pip) and PyPI: uv itself is bootstrapped at a pinned version into `.tools/` (git-ignored).
#
#   make lock          re-resolve uv.lock after editing pyproject.toml (keeps existing pins)
#   make lock-upgrade  re-resolve uv.lock with the newest releases allowed by pyproject.toml
#   make lock-check    fail if uv.lock is out of date with pyproject.toml (CI runs this)
#   make docs          the docs site into site/ (mkdocs build --strict; CI runs it)
#   make test-latest   the fast suite against the newest releases, in .venv-latest (drift on purpose)
#   make bench         the speed instruments of benchmarks/, each at a quick setting
PY ?= python3
UV_VERSION := 0.13.9
# the extras the test suite needs (ray is locked too; its tests skip when it is absent)
EXTRAS := dev docs cpsat cbc gurobi sweep ray
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.synced
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.synced
TOOLS := .tools
UV := $(TOOLS)/bin/uv
LATEST := .venv-latest
comma := ,
space := $(subst ,, )
EXTRAS_CSV := $(subst $(space),$(comma),$(EXTRAS))
PYTEST_ARGS ?= -q -n 2

# uv uses the interpreter given by $(PY), never one it downloads; its output goes to stderr
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)
export UV_LINK_MODE ?= copy
# write .pyc files at install time: with PYTHONDONTWRITEBYTECODE set (as on this project's
# machines) every process would otherwise recompile numpy, matplotlib and the solvers' Python
# on import, 2-7 s that count against a short --time-limit
export UV_COMPILE_BYTECODE := 1
unexport VIRTUAL_ENV

$(UV):
	$(PY) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install -q --disable-pip-version-check 'uv==$(UV_VERSION)'

# --locked: install exactly uv.lock, and refuse (rather than re-resolve) if it is stale
$(STAMP): $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --python $(PY) $(addprefix --extra ,$(EXTRAS))
	touch $(STAMP)

# the demo's environment: the same lock, no extras (the core dependencies only)
$(DEMO_STAMP): $(UV) pyproject.toml uv.lock
	UV_PROJECT_ENVIRONMENT=$(DEMO_VENV) $(UV) sync --locked --python $(PY)
	touch $(DEMO_STAMP)

.PHONY: demo test test-slow test-latest lint lock lock-upgrade lock-check uv docs bench

uv: $(UV)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/optsched demo

# optsched's own bytecode too (PYTHONDONTWRITEBYTECODE stops the interpreter writing it), and
# the numba kernels compiled into their on-disk cache once (tens of CPU seconds on a fresh
# clone), so that no test with a short --time-limit pays for the compilation
test: $(STAMP)
	$(BIN)/python -m compileall -q optsched > /dev/null
	$(BIN)/python -m optsched.cli.warm
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# pytest exits 5 when it collects nothing: no slow test is not a failure
test-slow: $(STAMP)
	$(BIN)/python -m compileall -q optsched > /dev/null
	$(BIN)/python -m optsched.cli.warm
	$(BIN)/python -m pytest $(PYTEST_ARGS) -m slow || [ $$? -eq 5 ]

# the docs site into site/ (git-ignored), warnings as errors: the notebooks are executed in FAST
# mode into docs/notebooks/*.ipynb first (only those whose .py changed), then mkdocs builds
docs: $(STAMP)
	$(BIN)/python docs/execute_notebooks.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet

# lint-imports: the layer contract in pyproject.toml ([tool.importlinter]; issue 27)
lint: $(STAMP)
	$(BIN)/ruff check optsched tests notebooks docs benchmarks studies
	$(BIN)/mypy optsched
	$(BIN)/lint-imports --no-cache --no-logo

# the speed instruments (benchmarks/README.md), each at a quick setting; BENCH_ARGS=--full for
# the published settings, or instrument names to run only those
bench: $(STAMP)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

lock: $(UV)
	$(UV) lock --python $(PY)

lock-upgrade: $(UV)
	$(UV) lock --upgrade --python $(PY)

lock-check: $(UV)
	$(UV) lock --check --python $(PY) || { \
		echo "uv.lock is out of date with pyproject.toml: run 'make lock' and commit uv.lock" >&2; \
		exit 1; }

# Ignores uv.lock on purpose: resolves the newest releases every time it runs.
test-latest: $(UV)
	$(UV) venv -q --allow-existing --python $(PY) $(LATEST)
	$(UV) pip install -q --python $(LATEST)/bin/python --upgrade --refresh \
		-e '.[$(EXTRAS_CSV)]'
	$(UV) pip list -q --python $(LATEST)/bin/python | grep -Ei '^(numpy|highspy|pulp|gurobipy|ortools|pytest) ' >&2
	$(LATEST)/bin/python -m pytest $(PYTEST_ARGS)
