"""DeepL's API, so that DeepL's clients (``pip install deepl``: ``deepl.Translator(key,
server_url=URL)``, ``deepl.DeepLClient``) and the tools built on them work unchanged.

- ``POST /v2/translate``: ``text`` (list), ``target_lang`` ZH, ZH-HANS or ZH-HANT (converted
  by OpenCC), ``source_lang`` EN or none (answered as detected EN), ``split_sentences``,
  ``tag_handling`` html, a glossary (an EN to ZH one serves ZH-HANT too);
  ``glossary_terms_not_met`` (the English sides of terms the translation could not be made to
  hold) and ``windowed`` (a sentence too long to translate whole) are our additions to a
  translation, and DeepL's clients ignore fields they do not know (``deepl_translate``).
- glossaries, EN to ZH only: ``/v2/glossaries`` (create, list, get, entries as TSV, delete)
  and the multilingual ``/v3/glossaries`` (also rename, replace or merge the dictionary, delete
  it); both show the same glossaries (``glossaries.GlossaryStore``; ``deepl_glossary_routes``).
- documents: ``POST /v2/document`` (upload), ``/v2/document/{id}`` (status) and
  ``/v2/document/{id}/result`` (download, once), translated in the background in their own
  format, as ``/translate_file`` translates them (``deepl_documents``).
- ``/v2/languages``, ``/v2/glossary-language-pairs``, ``/v2/usage`` (the characters translated
  since the server started, against a limit no server reaches: nothing is billed here).

Keys: ``Authorization: DeepL-Auth-Key KEY`` (or an ``auth_key`` parameter, as older clients
send it), checked against ``--api-keys`` when the server has them (``deepl_requests``).
Errors are DeepL's ``{"message": "..."}`` (``app._error_response``), with its status codes,
which the clients turn into their exceptions: 400 bad request, 403 key, 404 no such glossary,
413 too large, 456 too many glossaries.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from seq2seq.serve.deepl_documents import DocumentServer, add_document_routes
from seq2seq.serve.deepl_glossary_routes import add_glossary_routes
from seq2seq.serve.deepl_requests import Arguments, KeyedArguments
from seq2seq.serve.deepl_translate import TARGETS, DeeplTranslate, Usage
from seq2seq.serve.files import TranslateTexts
from seq2seq.serve.glossaries import GlossaryStore
from seq2seq.serve.handling import ServerSettings
from seq2seq.serve.protocol import ApiError
from seq2seq.serve.served_model import ServedModel

CHARACTER_LIMIT = 10**15  # /v2/usage's limit: none here, and clients read "limit reached"


def add_deepl_routes(
    app: FastAPI,
    served: ServedModel,
    settings: ServerSettings,
    translate_texts: TranslateTexts,
    store: GlossaryStore,
) -> None:
    """DeepL's routes: ``/v2/translate``, documents, what the server offers, glossaries."""
    arguments = KeyedArguments(settings)
    usage = Usage()
    translate = DeeplTranslate(served, settings, arguments, translate_texts, store, usage)
    app.add_api_route("/v2/translate", translate.translate, methods=["POST"])
    info = DeeplInfoRoutes(served, arguments, usage)
    app.add_api_route("/v2/languages", info.languages, methods=["GET", "POST"])
    app.add_api_route(
        "/v2/glossary-language-pairs", info.glossary_language_pairs, methods=["GET", "POST"]
    )
    app.add_api_route("/v2/usage", info.get_usage, methods=["GET", "POST"])
    add_glossary_routes(app, store, arguments)
    documents = DocumentServer(
        settings, arguments, translate_texts, store, usage, served.translates
    )
    add_document_routes(app, documents)


class DeeplInfoRoutes:
    """What the server offers: its languages, its glossaries' language pair, its usage."""

    def __init__(self, served: ServedModel, arguments: Arguments, usage: Usage) -> None:
        self.served = served
        self.arguments = arguments
        self.usage = usage

    async def languages(self, request: Request) -> list[dict[str, Any]]:
        """type=source (the default): EN; type=target: ZH, ZH-HANS and ZH-HANT."""
        args = await self.arguments(request)
        kind = args.get("type") or "source"
        if kind not in ("source", "target"):
            raise ApiError(400, f"Value for 'type' not supported: {kind} (source or target)")
        if not self.served.translates:
            return []
        if kind == "source":
            return [{"language": "EN", "name": "English"}]
        return [
            {"language": code, "name": name, "supports_formality": False}
            for code, (name, _) in TARGETS.items()
        ]

    async def glossary_language_pairs(self, request: Request) -> dict:
        await self.arguments(request)
        return {"supported_languages": [{"source_lang": "en", "target_lang": "zh"}]}

    async def get_usage(self, request: Request) -> dict:
        """The characters translated since the server started; the limit is never reached."""
        await self.arguments(request)
        return {"character_count": self.usage.characters, "character_limit": CHARACTER_LIMIT}
