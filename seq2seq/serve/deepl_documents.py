"""DeepL's document translation, as ``deepl.Translator.translate_document`` calls it:

- ``POST /v2/document``: multipart ``file``, ``target_lang`` (ZH, ZH-HANS, ZH-HANT),
  ``source_lang`` (EN or none), ``filename`` (names the file when its part does not),
  ``output_format`` (only the file's own), ``glossary_id``; answers ``{"document_id",
  "document_key"}`` once the file has been read, so a file of another format, or a corrupt,
  unsafe or too large one, is a 400 at once; its translation waits in ``DocumentStore``.
- ``POST /v2/document/{document_id}`` with ``document_key``: ``{"document_id", "status"}``,
  ``queued``, ``translating`` (with ``seconds_remaining`` once a document has been timed),
  ``done`` (with ``billed_characters``: the characters of its translated text) or ``error``
  (with ``error_message``).
- ``POST /v2/document/{document_id}/result`` with ``document_key``: the translated file, in its
  format; then the document is gone (404), as at DeepL. Before it is done: 503, which the
  client raises as ``DocumentNotReadyException``.

The formats are ``/translate_file``'s (``files.SUPPORTED``), read and written by the same
functions. A wrong ``document_key`` is a 403, an unknown, expired or downloaded document a 404.
"""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import dataclass
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import UploadFile

from seq2seq.errors import DataError
from seq2seq.formats import EXTENSIONS, ZIPPED, parse, segments
from seq2seq.formats.encoding import encode_document
from seq2seq.inference.options import TranslateOptions
from seq2seq.serve.deepl_requests import Arguments
from seq2seq.serve.deepl_translate import Usage, _glossary, _languages, _refuse_unsupported
from seq2seq.serve.document_store import DocumentStore, KeptDocument
from seq2seq.serve.files import (
    MEDIA_TYPES,
    TranslateTexts,
    _checked_upload,
    _decoded,
    _form,
    _zipped,
)
from seq2seq.serve.glossaries import GlossaryStore
from seq2seq.serve.handling import ServerSettings
from seq2seq.serve.protocol import ApiError


@dataclass(frozen=True)
class DocumentServer:
    """What the routes need beyond a request: the settings, the key-checked parameters, the
    translator of texts, the glossaries and the characters counted for ``/v2/usage``."""

    settings: ServerSettings
    arguments: Arguments
    translate_texts: TranslateTexts
    glossaries: GlossaryStore
    usage: Usage
    translates: bool


def add_document_routes(app: FastAPI, server: DocumentServer) -> None:
    """The three routes; their handlers are the methods of ``DocumentRoutes``."""
    routes = DocumentRoutes(server)
    app.add_api_route("/v2/document", routes.upload, methods=["POST"])
    app.add_api_route("/v2/document/{document_id}", routes.status, methods=["POST"])
    app.add_api_route("/v2/document/{document_id}/result", routes.result, methods=["POST"])


class DocumentRoutes:
    """The handlers, over the documents kept (``DocumentStore``)."""

    def __init__(self, server: DocumentServer) -> None:
        self.server = server
        self.store = DocumentStore(server.translate_texts, server.usage)

    async def upload(self, request: Request) -> JSONResponse:
        """A document read, checked and queued for translation: its id and key."""
        args = await self.server.arguments(request)
        form = await _form(request)  # the multipart body, parsed once and cached
        document = await self._read(form.get("file"), args)
        document_id, key = self.store.add(document)
        return JSONResponse({"document_id": document_id, "document_key": key})

    async def status(self, document_id: str, request: Request) -> JSONResponse:
        """Where the document's translation stands (DeepL's status object)."""
        document = await self._found(document_id, request)
        answer: dict = {"document_id": document_id, "status": document.status}
        if document.status == "translating":
            remaining = self.store.seconds_remaining(document)
            if remaining is not None:
                answer["seconds_remaining"] = remaining
        elif document.status == "done":
            answer["billed_characters"] = document.characters
        elif document.status == "error":
            answer["error_message"] = document.error
        return JSONResponse(answer)

    async def result(self, document_id: str, request: Request) -> Response:
        # No docstring: FastAPI would publish it as the route's OpenAPI description.
        document = await self._found(document_id, request)
        if document.status == "error":
            raise ApiError(400, f"Document translation failed: {document.error}")
        if document.body is None:
            raise ApiError(503, f"Document not ready: its translation is {document.status}")
        self.store.remove(document_id)  # downloaded once, as DeepL does
        charset = "" if document.text_format in ZIPPED else "; charset=utf-8"
        media_type = MEDIA_TYPES.get(document.text_format, "application/octet-stream")
        return Response(
            document.body,
            media_type=media_type + charset,
            headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quote(document.name)}"},
        )

    async def _found(self, document_id: str, request: Request) -> KeptDocument:
        """The document of ``document_id`` once its ``document_key`` matches."""
        args = await self.server.arguments(request)
        document = self.store.get(document_id)
        key = args.get("document_key")
        if not key:
            raise ApiError(400, "Parameter 'document_key' not specified.")
        if not isinstance(key, str) or not hmac.compare_digest(key, document.key):
            raise ApiError(403, "Invalid document key for this document_id")
        return document

    async def _read(self, upload: UploadFile | str | None, args: dict) -> KeptDocument:
        """The upload read and parsed as ``/translate_file`` reads it, with the options its
        translation takes; every bad parameter or file is a 400 here, before it is queued."""
        if not self.server.translates:
            raise ApiError(400, "this model is a language model, not a translator")
        target = _languages(args)
        _refuse_unsupported(args)
        glossary = _glossary(args, self.server.glossaries)
        if isinstance(upload, UploadFile) and isinstance(args.get("filename"), str):
            upload.filename = args["filename"]  # DeepL's field naming the uploaded file
        limit = self.server.settings.file_limit
        upload, name, extension = _checked_upload(upload, limit)
        text_format = EXTENSIONS[extension]
        _check_output_format(args.get("output_format"), text_format)
        options = TranslateOptions(
            beam_size=self.server.settings.beam_size,
            format=text_format,
            glossary=glossary,
            target=target,
        )
        data = await upload.read()
        read = _read_zipped if text_format in ZIPPED else _read_text
        texts, write, characters = await asyncio.to_thread(read, data, text_format, name, limit)
        return KeptDocument(name, text_format, options, texts, write, characters, len(data))


def _read_zipped(data: bytes, text_format: str, name: str, limit: int) -> tuple:
    """A zipped document's parts, the writer of the file, and its characters to translate."""
    documents, write = _zipped(data, text_format, name, limit)
    characters = sum(len(s.text) for document in documents for s in segments(document))
    return documents, write, characters


def _read_text(data: bytes, text_format: str, name: str, limit: int) -> tuple:
    """A text document (in any encoding), the writer of its translation (UTF-8, declared so)
    and its characters to translate; parsed here so that a file that does not parse is a 400
    at upload, not an error found later."""
    decoded = _decoded(data, text_format, name, limit)
    try:
        document = parse(decoded.text, text_format, name)
    except DataError as error:
        raise ApiError(400, f"Invalid request: {error}") from None
    characters = sum(len(segment.text) for segment in segments(document))

    def write(translated: list[str]) -> bytes:
        return encode_document(translated[0], text_format, decoded)

    return [decoded.text], write, characters


def _check_output_format(value: object, text_format: str) -> None:
    """``output_format``: none, or the file's own format (no conversion is made here)."""
    if value in (None, ""):
        return
    asked = EXTENSIONS.get(f".{str(value).lower().lstrip('.')}")
    if asked != text_format:
        raise ApiError(
            400,
            f"Value for 'output_format' not supported: {value} (this server writes a document "
            f"in its own format: {text_format})",
        )
