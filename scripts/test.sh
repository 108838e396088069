#!/usr/bin/env bash
# Set up (see setup.sh) and run the test suite. Real-data smoke tests read $ATTNCLF_DATA_DIR,
# by default ../shared/datasets beside this checkout. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export ATTNCLF_DATA_DIR="${ATTNCLF_DATA_DIR:-$(cd .. && pwd)/shared/datasets}"
exec .venv/bin/python -m pytest "$@"
