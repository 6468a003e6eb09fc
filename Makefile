# Two commands: `make run` (the embedded default, ready to try) and `make test` (the whole suite).
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-explore bootstrap worker bench clean

# DEBUG is off by default; the local development server turns it on explicitly.
run: export DJANGO_DEBUG = true
run:
	@scripts/bootstrap.sh run
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap_demo --host $(HOST) --port $(PORT)
	$(PY) manage.py runserver $(HOST):$(PORT)

test:
	@scripts/bootstrap.sh test
	$(PY) -m pytest $(PYTEST_ARGS)

# The property tests with a randomised, ten times longer Hypothesis search (CI runs them derandomised).
test-explore:
	@scripts/bootstrap.sh test
	HYPOTHESIS_PROFILE=explore $(PY) -m pytest -q -p no:cacheprovider tests/gatekeeper tests/graph $(PYTEST_ARGS)

worker:
	@scripts/bootstrap.sh run
	.venv/bin/celery -A config worker -l INFO -Q diagnosis,maintenance

bench:
	@scripts/bootstrap.sh test
	.venv/bin/pip install -q -r requirements-bench.txt
	$(PY) bench/engine_overhead.py

clean:
	rm -rf .venv var .pytest_cache
