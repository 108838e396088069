#!/usr/bin/env bash
# Set up (see setup.sh) and run the test suite. Real-data smoke tests read $ATTNCLF_DATA_DIR,
# by default ../shared/datasets beside this checkout. Extra arguments go to pytest (-n 0: one process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# The report test renders report.html in headless Chromium (Debian's package).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
  echo "test: installing Debian's chromium for the report rendering test"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null) \
    || echo "test: could not install chromium; the report rendering test will be skipped"
fi
export ATTNCLF_DATA_DIR="${ATTNCLF_DATA_DIR:-$(cd .. && pwd)/shared/datasets}"
# Each test runs on one thread (tests/conftest.py), so a worker per core, up to 4, cuts the wall time (a file's
# tests stay in one worker, which keeps its module fixtures shared; the slowest files set the floor beyond 4).
workers=$(nproc); (( workers > 4 )) && workers=4
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile "$@"
