# tablectl: the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Two installs (docs/operations.md, "Installing"): `make run` the runtime with the studio and the
# archive beside the table (.[studio,archive]: no test or type-checking tools); `make test` and
# the checks the dev extra (which includes both). A table computer installs `tablectl` alone.
STAMP  := $(VENV)/.installed-stamp
RUN_STAMP := $(VENV)/.installed-run-stamp
# make test's pytest-xdist workers: six on this 2-core machine (most of a test's time is spent
# waiting on a broker, a process or a browser); 0 runs the suite in one process.
TEST_WORKERS ?= 6

.PHONY: run test test-fast check lint typecheck imports bench chaos clean gallery

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[studio,archive]'
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml
	@{ [ -e /usr/include/PCSC/winscard.h ] && command -v swig >/dev/null 2>&1; } || { \
	  echo "libpcsclite-dev or swig not found: installing them with apt-get (pyscard, the"; \
	  echo "PC/SC readers' extra in dev, is built on them)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libpcsclite-dev swig; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP) $(RUN_STAMP)

## make run: a simulated Teen Patti 20-20 table, on Mosquitto at 127.0.0.1:1883 if one answers,
## otherwise on an embedded broker, and the studio beside it (its address is printed: dealer
## screen and overlay on 127.0.0.1:8080; taken: an error naming its holder). Ctrl-C stops the table; the studio
## keeps serving (--linger: the secure-delay overlay shows the last result) until Ctrl-C again.
## RUN_ARGS adds options to `tablectl run` (--no-studio, --studio-port P, 0: a free one).
run: $(RUN_STAMP)
	$(BIN)/tablectl run --simulate --show --linger $(RUN_ARGS)

## make test: the whole suite. Installs Mosquitto, PostgreSQL, Chromium (the studio's page
## tests, driven by Playwright: no browser is downloaded), pcscd and vsmartcard-vpcd (the PC/SC
## readers' tests) with apt-get when missing.
test: $(STAMP)
	@command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || { \
	  echo "mosquitto not found: installing it with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "postgresql not found: installing it with apt-get (the archive's tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }
	@[ -x /usr/bin/chromium ] || { \
	  echo "chromium not found: installing it with apt-get (the studio's page tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	@{ [ -x /usr/sbin/pcscd ] && [ -e /usr/lib/pcsc/drivers/serial/libifdvpcd.so ]; } || { \
	  echo "pcscd or vsmartcard-vpcd not found: installing them with apt-get (the PC/SC readers'"; \
	  echo "tests run a private pcscd with a virtual reader: simulators/pcscd.py)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pcscd vsmartcard-vpcd; }
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

## make test-fast: the tier a developer runs on every change, in under a minute: tests/unit and
## the end-to-end cases on the in-memory null modem and broker (memory://), without Mosquitto,
## PostgreSQL, Chromium, a pty or a child process (pytest --fast; tests/conftest.py).
test-fast: $(STAMP)
	$(BIN)/pytest --fast -q $(PYTEST_ARGS)

## make gallery: the screenshot matrix (tests/studio/test_gallery.py: every game, page and
## state on a real simulated table, in Chromium) at half scale, its chosen shots written to
## docs/gallery/ (committed, shown in docs/studio.md "Gallery"). Needs what `make test`
## installs (Mosquitto, Chromium). The matrix's findings are printed; the gallery is made anyway.
gallery: $(STAMP)
	rm -f docs/gallery/*.png
	TABLECTL_GALLERY=docs/gallery TABLECTL_SCREENS_SCALE=0.5 $(BIN)/pytest \
	  tests/studio/test_gallery.py -q -p no:cacheprovider; status=$$?; \
	  du -ch docs/gallery/*.png | tail -1; \
	  [ $$status -eq 0 ] || echo "make gallery: the matrix has findings (above): the gallery shows the pages as they are"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

## make imports: the import rule (layers controller.cli > simulators > controller > drivers,
## no cycles); contracts in pyproject.toml, see docs/architecture.md "Packages and layers".
imports: $(STAMP)
	$(BIN)/lint-imports

check: lint typecheck imports test

bench: $(STAMP)
	$(BIN)/python bench/scan_to_publish.py

## make chaos: the full chaos run (200 rounds with crashes, broker restarts, unplugged scanner).
chaos: $(STAMP)
	TABLECTL_CHAOS_ROUNDS=200 $(BIN)/pytest tests/chaos -s -p no:cacheprovider --timeout 0

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache build *.egg-info
