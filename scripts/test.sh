#!/usr/bin/env bash
# Set up what is missing, check lint and formatting, then run the test suite. This is what CI
# (.ci/run) calls.
#   ./scripts/test.sh            # whole suite
#   ./scripts/test.sh -m "not slow" tests/test_model.py   # any pytest arguments
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
# The standards the tools can enforce: lint and formatting (pyproject.toml's [tool.ruff]).
"$PYTHON" -m ruff check --quiet seq2seq tests scripts
"$PYTHON" -m ruff format --check --quiet seq2seq tests scripts
"$PYTHON" -m pytest "$@"
