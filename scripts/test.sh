#!/usr/bin/env bash
# Set up what is missing, check lint and formatting, then run the test suite. This is what CI
# (.ci/run) calls.
#   ./scripts/test.sh            # whole suite
#   ./scripts/test.sh -m "not slow" tests/test_model.py   # any pytest arguments: one pytest run
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
# The standards the tools can enforce: lint and formatting (pyproject.toml's [tool.ruff]).
"$PYTHON" -m ruff check --quiet seq2seq tests scripts
"$PYTHON" -m ruff format --check --quiet seq2seq tests scripts
if [ $# -gt 0 ]; then
  exec "$PYTHON" -m pytest "$@"
fi
# The whole suite in two runs. First everything but the serial tests on two workers, one torch
# thread each: much of the slow tier waits on one core (a subprocess importing torch and
# Lightning, Lightning's launcher starting rank 1 after rank 0), so a second worker fills the
# idle core. Then the serial tests (servers under concurrent load, benches that time them) alone,
# as their timings assume. Both run whatever the first's outcome; either failing fails the suite.
OMP_NUM_THREADS=1 "$PYTHON" -m pytest -n 2 -m "not serial" || parallel=$?
"$PYTHON" -m pytest -m serial || serial=$?
exit "${parallel:-${serial:-0}}"
