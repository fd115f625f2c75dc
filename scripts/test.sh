#!/usr/bin/env bash
# Set up what is missing, then run the test suite. This is what CI (.ci/run) calls.
#   ./scripts/test.sh            # whole suite
#   ./scripts/test.sh -m "not slow" tests/test_model.py   # any pytest arguments
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
python -m pytest "$@"
