#!/usr/bin/env bash
# Start Debian's Prometheus (package `prometheus`, /usr/bin/prometheus) for integration tests.
#
#   URL=$(scripts/start_prometheus.sh)        # prints e.g. http://127.0.0.1:40123
#   ...
#   kill "$(cat "$PROMETHEUS_DIR/prometheus.pid")"   # dir is reported on stderr
#
# Writes a temp dir with a self-scrape config (1 s interval) and an always-firing alert
# rule (AlwaysFiring: vector(1), labels severity=page, service=prometheus), starts the
# server on a free 127.0.0.1 port, waits (bounded) for /-/ready, for `up` samples and for
# the alert to fire, then prints the base URL on stdout. Everything else goes to stderr.
# Mirrors the session fixture in tests/backends/conftest.py.
#
# Env: PROMETHEUS_BIN (default /usr/bin/prometheus), PROMETHEUS_PORT (default: free port),
#      PROMETHEUS_WAIT_SECONDS (default 60).
set -euo pipefail

PROM_BIN="${PROMETHEUS_BIN:-/usr/bin/prometheus}"
WAIT_SECONDS="${PROMETHEUS_WAIT_SECONDS:-60}"

if [ ! -x "$PROM_BIN" ]; then
    echo "start_prometheus: $PROM_BIN not found; install it with: apt-get install -y prometheus" >&2
    exit 1
fi

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
        return
    fi
    local p
    for p in $(seq 19090 19990); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    echo "start_prometheus: no free port found" >&2
    exit 1
}

http_get() {  # http_get URL -> body on stdout, non-zero on failure
    if command -v curl >/dev/null 2>&1; then
        curl -fsS --max-time 2 "$1"
    else
        wget -q -T 2 -O - "$1"
    fi
}

PORT="${PROMETHEUS_PORT:-$(free_port)}"
ADDR="127.0.0.1:$PORT"
URL="http://$ADDR"
DIR="$(mktemp -d "${TMPDIR:-/tmp}/prometheus-test.XXXXXX")"

cat >"$DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["$DIR/rules.yml"]
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ["$ADDR"]
EOF

cat >"$DIR/rules.yml" <<'EOF'
groups:
  - name: test
    interval: 1s
    rules:
      - alert: AlwaysFiring
        expr: vector(1)
        labels: {severity: page, service: prometheus}
        annotations:
          summary: "always on"
          description: "test alert that is always firing"
EOF

nohup "$PROM_BIN" \
    --config.file="$DIR/prometheus.yml" \
    --web.listen-address="$ADDR" \
    --storage.tsdb.path="$DIR/data" \
    --log.level=warn \
    </dev/null >"$DIR/prometheus.log" 2>&1 &
PID=$!
echo "$PID" >"$DIR/prometheus.pid"

fail() {
    echo "start_prometheus: $1" >&2
    tail -n 30 "$DIR/prometheus.log" >&2 || true
    kill "$PID" 2>/dev/null || true
    exit 1
}

deadline=$((SECONDS + WAIT_SECONDS))
until http_get "$URL/-/ready" >/dev/null 2>&1; do
    kill -0 "$PID" 2>/dev/null || fail "prometheus exited before becoming ready"
    [ "$SECONDS" -lt "$deadline" ] || fail "not ready after ${WAIT_SECONDS}s"
    sleep 0.2
done
until http_get "$URL/api/v1/query?query=up" 2>/dev/null | grep -q '"value"' \
      && http_get "$URL/api/v1/alerts" 2>/dev/null | grep -q '"state":"firing"'; do
    kill -0 "$PID" 2>/dev/null || fail "prometheus exited while waiting for samples"
    [ "$SECONDS" -lt "$deadline" ] || fail "no 'up' samples / firing alert after ${WAIT_SECONDS}s"
    sleep 0.2
done

echo "start_prometheus: pid $PID, dir $DIR (stop: kill $PID)" >&2
echo "PROMETHEUS_DIR=$DIR" >&2
echo "$URL"
