"""``seq2seq serve``: a trained model behind an HTTP API (``pip install -e ".[serve]"``).

- ``batching``: the worker thread that owns the model and batches requests together;
- ``model``: the served model (translator or language model) and its batch functions;
- ``protocol``: LibreTranslate's and OpenAI's request and answer shapes, checked;
- ``handling``: settings, API keys, handing jobs to the worker and waiting for them;
- ``translation_routes``, ``completion_routes``: the two APIs; ``app``: the FastAPI app, errors,
  health, the page and the request log; ``server``: loading, warming up, uvicorn, shutdown.
"""
