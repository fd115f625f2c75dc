"""``seq2seq serve``, floor 6 (with the tools): a trained model behind HTTP APIs
(``pip install -e ".[serve]"``).

- ``worker``: the worker thread that owns the model and batches requests together;
- ``served_model``: the served model (translator or language model) and its batch functions;
- ``files``: ``/translate_file``, documents uploaded and translated in their own format;
- ``protocol``: LibreTranslate's and OpenAI's request and answer shapes, checked;
- ``handling``: settings, API keys, handing jobs to the worker and waiting for them;
- ``translation_routes``, ``deepl_routes``, ``completion_routes``: the three APIs;
  ``glossaries``: DeepL's glossaries, in memory or a directory; ``app``: the FastAPI app, errors,
  health, the page and the request log; ``server``: loading, warming up, uvicorn, shutdown;
- ``text_translation``: texts in a format translated through the worker, for every API;
- ``deepl_translate``: DeepL's ``/v2/translate`` and the checks of its parameters;
- ``deepl_documents``: DeepL's ``/v2/document`` routes (upload, status, result), over
  ``document_store``: the documents held and translated in the background;
- ``deepl_glossary_routes``: DeepL's ``/v2/glossaries`` and ``/v3/glossaries`` endpoints;
- ``deepl_requests``: a DeepL request's parameters and its key.
"""
