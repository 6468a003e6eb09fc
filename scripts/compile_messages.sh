#!/usr/bin/env bash
# Compile the engine's text catalogues (diagnosis/locale/*/LC_MESSAGES/*.po) into the .mo files read at run
# time by diagnosis.i18n. The .mo files are committed, so a checkout works without this step; the test
# suite checks that each .mo is its .po compiled. Needs msgfmt (Debian package gettext).
set -euo pipefail
cd "$(dirname "$0")/.."
for po in diagnosis/locale/*/LC_MESSAGES/*.po; do
  msgfmt --check --output-file="${po%.po}.mo" "$po"
done
