#!/usr/bin/env bash
# A virtual environment holding LibreTranslate (and the Argos Translate it serves with), made
# from PyPI once and reused; prints its python. LibreTranslate pins its own dependencies
# (numpy<2, flask 2.2, requests 2.31, ...), so it never goes into the environment seq2seq runs
# in. tests/test_argos.py and docs/libretranslate.md use it.
#   scripts/libretranslate_env.sh            # ~/.cache/seq2seq/libretranslate-venv
#   scripts/libretranslate_env.sh DIR        # or $SEQ2SEQ_LIBRETRANSLATE_VENV
#   PYTHON=python3.12 scripts/libretranslate_env.sh      # the interpreter it is made from
#   SEQ2SEQ_CTRANSLATE2=4.8.5 scripts/libretranslate_env.sh
#       # with this CTranslate2 (the tests pass the main environment's: same beams, bit for bit)
# The first run downloads about 150 MB of wheels (40 s on a fast link); later runs print the
# path at once. Exit status 1, with pip's reason on stderr, when it cannot be made (e.g. no
# network to PyPI).
set -euo pipefail
VERSION=1.9.6
PYTHON=${PYTHON:-python3}
VENV=${1:-${SEQ2SEQ_LIBRETRANSLATE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/seq2seq/libretranslate-venv}}
CT2=${SEQ2SEQ_CTRANSLATE2:-}
MARKER="$VENV/.seq2seq-libretranslate-$VERSION"  # written last: the venv is complete
CT2_MARKER="$VENV/.seq2seq-ctranslate2-$CT2"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

ready() { [ -f "$MARKER" ] && { [ -z "$CT2" ] || [ -f "$CT2_MARKER" ]; }; }

install() {  # pip install "$@" into the venv, its output shown only when it fails
  if ! "$VENV/bin/python" -m pip install -q "$@" >"$VENV.log" 2>&1; then
    tail -n 20 "$VENV.log" >&2
    echo "libretranslate_env: could not install $* into $VENV" >&2
    return 1
  fi
  rm -f "$VENV.log"
}

if ready; then
  echo "$VENV/bin/python"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
# Two test runs at once build it once: the second waits for the first, then finds it ready.
exec 9>"$VENV.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if [ ! -f "$MARKER" ]; then
  echo "libretranslate_env: making $VENV (libretranslate==$VERSION from PyPI)" >&2
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  install "libretranslate==$VERSION" || { rm -rf "$VENV"; exit 1; }
  "$VENV/bin/python" -W ignore -c "import libretranslate, argostranslate.package, minisbd"
  touch "$MARKER"
fi
if [ -n "$CT2" ] && [ ! -f "$CT2_MARKER" ]; then
  install "ctranslate2==$CT2"
  rm -f "$VENV"/.seq2seq-ctranslate2-*
  touch "$CT2_MARKER"
fi
echo "$VENV/bin/python"
