#!/usr/bin/env bash
# The GPU check in one command: the GPU tests, base bf16 training throughput and MFU against
# MarianMTModel, GPU decoding against CTranslate2, within a time budget (8.5 minutes by
# default, installing included); the table is printed last and written under --out.
#   scripts/gpu_check.sh --out DIR                 # on a GPU machine with the packages
#   scripts/gpu_check.sh --wheels .whl --out DIR   # offline: install the carried wheels first
#   scripts/gpu_check.sh --prepare .whl            # here, with PyPI: download those wheels
#   scripts/gpu_check.sh --dry-run --out DIR       # the same on the CPU, tiny shapes, ~1 min
# Every option: scripts/gpu_check.sh --help (the code: scripts/benchmarks/gpu_check.py).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# The package from this checkout and the benchmark helpers beside it, without an install.
export PYTHONPATH="$root:$root/scripts${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
exec "${PYTHON:-python3}" -m benchmarks.gpu_check "$@"
