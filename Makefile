# The two quick-start commands (`make demo`, `make test`) set up everything they need themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime

.PHONY: demo test test-fast test-quick lint reliability bench rules clean

# The demo needs the runtime only (flask, kubernetes, prometheus-client, pyyaml, gunicorn); the test, lint and
# bench targets add the test extras (pytest, hypothesis, helm's engine, mypy, ...).
# setuptools' editable install prints a boxed "Editable installation ... folders with the same name as your
# package" BuildBackendWarning through a current pip even with -q: noise for a first run (the checkout is the
# package), so it is filtered by its message (PYTHONWARNINGS reaches pip's build-backend subprocess).
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

$(RUNTIME): pyproject.toml
	@echo "first run: creating $(VENV) and installing the reactor's runtime"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	@echo "installing the test extras into $(VENV) (once)"
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(RUNTIME)
	$(VENV)/bin/reactor demo --once

# Every tier, on every core (pytest-xdist), then the tests that assert a wall-clock time alone: a loaded neighbour
# must not make a timing test read as a failure of the code.
test: $(STAMP)
	$(PY) -m pytest -q -n auto -m "not wallclock"
	$(PY) -m pytest -q -m wallclock

# ruff (rules in pyproject.toml), mypy, and the layer contracts (import-linter, [tool.importlinter]); all must pass.
lint: $(STAMP)
	$(VENV)/bin/ruff check reactor reactor_sim
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The unit and component tiers (a module's own marker, else its folder's: tests/conftest.py) on every core (docs/development.md
# gives its measured time).
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "unit or component" -n auto

test-quick: $(STAMP)
	$(PY) -m pytest -q -m "not promstack and not slow"

# The long reliability run (storm minute, big fuzz, chaos) with its figures table; `make test` runs the short form.
reliability: $(STAMP)
	$(PY) reliability/report.py

# Measures and prints (never asserts a time); writes bench/results.json.
bench: $(STAMP)
	$(PY) bench/run.py

rules: $(STAMP)
	$(VENV)/bin/reactor rules render

clean:
	rm -rf $(VENV) .pytest_cache .import_linter_cache build *.egg-info
