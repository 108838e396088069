#!/usr/bin/env bash
# Set up a local virtual environment in .venv (created when missing) with attnclf installed.
# torch is pinned to 2.13.0 first: on this machine that is the CPU wheel on local disk, and pinning it
# keeps pip from ever resolving a multi-GB CUDA build. Re-running is cheap: nothing is reinstalled
# unless pyproject.toml changed.  Usage: bash scripts/setup.sh [--test]
set -euo pipefail
cd "$(dirname "$0")/.."
extras="serve,onnx"
[[ "${1:-}" == "--test" ]] && extras="serve,onnx,test"
PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.attnclf-setup-$(sha256sum pyproject.toml | cut -c1-16)-${extras//,/-}"
if [[ ! -f "$stamp" ]]; then
  echo "setup: installing torch==2.13.0 and attnclf[$extras] (about a minute)"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]" "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import torch, attnclf; assert torch.__version__.startswith('2.13.0'), torch.__version__"
  rm -f .venv/.attnclf-setup-*
  touch "$stamp"
fi
