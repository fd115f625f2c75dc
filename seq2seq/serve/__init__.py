"""``seq2seq serve``: a trained model behind an HTTP API (``pip install -e ".[serve]"``).

- ``batching``: the worker thread that owns the model and batches requests together;
- ``model``: the served model (translator or language model) and its batch functions;
- ``protocol``: LibreTranslate's and OpenAI's request and answer shapes, checked;
- ``app``: the FastAPI routes; ``server``: loading, warming up, uvicorn, shutdown.
"""
