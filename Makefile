# Two commands: `make run` (the embedded default, ready to try) and `make test` (the whole suite).
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-explore test-real-model bootstrap worker up bench clean

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

# The real local model suite (llama.cpp server + Gemma 3 270M, see docs/MODELS.md). The first run
# builds the server's virtualenv outside the repo (/var/cache/aiops-real-model): it compiles llama.cpp.
test-real-model:
	@scripts/bootstrap.sh test
	scripts/real_model_env.sh >/dev/null
	AIOPS_REAL_MODEL=1 $(PY) -m pytest -m real_model tests/real_model -s -p no:cacheprovider $(PYTEST_ARGS)

# The development worker beside `make run` (DEBUG on, like it); production workers run from the Procfile.
worker: export DJANGO_DEBUG ?= true
worker:
	@scripts/bootstrap.sh run
	.venv/bin/celery -A config worker -l INFO -Q diagnosis,maintenance

# The whole stack (Procfile: web on gunicorn/uvicorn, worker, beat) against local MariaDB and Redis,
# after the release step (migrate + collectstatic). Override DATABASE_URL / REDIS_URL as needed.
up: export DATABASE_URL ?= mysql://root@127.0.0.1:3306/aiops
up: export REDIS_URL ?= redis://127.0.0.1:6379/0
up: export PROMETHEUS_MULTIPROC_DIR ?= $(CURDIR)/var/prometheus
# DEBUG stays off, as in production: a secret key kept in var/ for this checkout, and the local host names.
up: export DJANGO_SECRET_KEY ?= $(shell mkdir -p var && { [ -s var/secret_key ] || (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(50))' > var/secret_key); } && cat var/secret_key)
up: export ALLOWED_HOSTS ?= 127.0.0.1,localhost
up:
	@scripts/bootstrap.sh run
	mkdir -p "$$PROMETHEUS_MULTIPROC_DIR" && find "$$PROMETHEUS_MULTIPROC_DIR" -maxdepth 1 -name '*.db' -delete
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/honcho start release
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/honcho start -p $(PORT) web worker beat

bench:
	@scripts/bootstrap.sh test
	.venv/bin/pip install -q -r requirements-bench.txt
	$(PY) bench/engine_overhead.py

clean:
	rm -rf .venv var .pytest_cache
