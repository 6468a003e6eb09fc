#!/usr/bin/env bash
# Set up everything the service (and, with --test, the test suite) needs on a fresh Debian/Ubuntu
# machine with nothing but python3: system packages, the virtualenv and the Python packages.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-run}
PY=${PYTHON:-python3}
VENV=.venv

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

apt_install() {
  local missing=()
  for pkg in "$@"; do have_pkg "$pkg" || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo="sudo"
  if command -v apt-get >/dev/null && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
    echo "bootstrap: installing system packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "bootstrap: please install these system packages first: ${missing[*]} (e.g. apt-get install ${missing[*]})" >&2
    exit 1
  fi
}

# mysqlclient compiles against the MySQL/MariaDB client headers.
if ! pkg-config --exists mysqlclient 2>/dev/null && ! pkg-config --exists libmariadb 2>/dev/null; then
  apt_install default-libmysqlclient-dev pkg-config build-essential
fi
if [ "$MODE" = "test" ]; then
  # The suite drives Debian's chromium and starts a real Prometheus server and Alertmanager.
  apt_install chromium prometheus prometheus-alertmanager
fi
# CJK fonts: Chinese in the console (and its screenshots) renders as glyphs, not boxes. The browser
# tests check it, so the test set-up needs them; for running the service they are a nicety.
if [ "$MODE" = "test" ]; then
  apt_install fonts-noto-cjk
else
  ( apt_install fonts-noto-cjk ) || echo "bootstrap: fonts-noto-cjk not installed: a browser on this machine may draw Chinese as boxes" >&2
fi
# gettext (msgfmt) compiles the engine's text catalogue (diagnosis/locale). The compiled .mo is committed, so
# the service runs without it; the test set-up needs it (a test checks that the .mo is the .po compiled).
if [ "$MODE" = "test" ]; then
  apt_install gettext
else
  ( apt_install gettext ) || echo "bootstrap: gettext not installed: the committed text catalogue is used as it is" >&2
fi
if command -v msgfmt >/dev/null; then
  scripts/compile_messages.sh
fi

if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PY" -m venv "$VENV" 2>/dev/null; then
    apt_install python3-venv
    "$PY" -m venv "$VENV"
  fi
fi

REQ=requirements.txt
[ "$MODE" = "test" ] && REQ=requirements-dev.txt
STAMP="$VENV/.installed-$(cat requirements*.txt | sha1sum | cut -c1-12)-$MODE"
if [ ! -f "$STAMP" ]; then
  "$VENV/bin/pip" install -q --upgrade pip 2>/dev/null | grep -v WARNING || true
  "$VENV/bin/pip" install -q -r "$REQ" 2>&1 | grep -v "^WARNING: Location" || true
  "$VENV/bin/python" -c "import django, rest_framework, celery, MySQLdb, openai" \
    || { echo "bootstrap: Python packages failed to install" >&2; exit 1; }
  touch "$STAMP"
fi
