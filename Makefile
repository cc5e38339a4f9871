# Two entry points do all the set-up on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-without-ray lint bench clean browser

# torch (the CPU wheel in /opt/wheels) is there only for the tests that check the default
# loggers never import it; pinned in the same resolve as the test extras, so that no package
# pulls a newer torch from the registry.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# compat: the editable install is a plain path entry, as an installed wheel's directory
	# is; the default finder hook imports pathlib in every process (~15 ms of each start,
	# which would make the start-up benches measure the checkout, not the package)
	$(BIN)/python -m pip install -q --config-settings editable_mode=compat -e ".[test]" "torch==2.13.0"
	# HEBO pins numpy<1.25 but runs on numpy 2: without its pins (its other needs come
	# with ax-platform); 1 MB
	$(BIN)/python -m pip install -q --no-deps "HEBO==0.3.6" "disjoint-set>=0.7"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The dashboard's browser tests drive Debian's chromium + chromium-driver: installed here
# once, where apt-get can (root, or password-less sudo); elsewhere those tests skip, saying so.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif ! command -v apt-get >/dev/null; then echo "no apt-get: the browser tests will skip"; \
	else SUDO=; [ "$$(id -u)" = 0 ] || SUDO="sudo -n"; \
	  ( $$SUDO apt-get update -q && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    chromium chromium-driver ) || echo "could not install chromium: the browser tests will skip"; \
	fi

test: $(STAMP) lint browser
	$(BIN)/python -m pytest -q

# The whole suite as on a machine without Ray (`import ray` fails; Ray's tests skip).
# Not part of `make test` (it would double CI's time): tests/test_without_ray.py runs a
# representative part of it there, and collects all of it.
test-without-ray: $(STAMP) browser
	FASTTUNE_TEST_WITHOUT_RAY=1 $(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
