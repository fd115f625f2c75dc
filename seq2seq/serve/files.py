"""LibreTranslate's file translation: ``POST /translate_file`` (multipart ``file``, ``source``,
``target``, ``api_key``) answers ``{"translatedFileUrl": ...}``, and ``GET
/download_file/{name}`` serves the translated file. Text, HTML, Markdown and SRT files keep
their markup (``seq2seq.formats``), Word and PowerPoint files their formatting
(``seq2seq.formats.office``, answered in their format); a file in any encoding is read
(``seq2seq.formats.encoding``: byte-order mark, declaration, UTF-8, else detected) and
answered in UTF-8, its declaration rewritten to say so and its byte-order mark kept.
Translated files are kept in memory (the newest ``KEPT_FILES``), as LibreTranslate keeps
them in a temporary folder.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.datastructures import UploadFile

from seq2seq.errors import DataError
from seq2seq.formats import EXTENSIONS, ZIPPED, Document, read_zipped, segments
from seq2seq.formats.encoding import Decoded, decode_document, encode_document
from seq2seq.inference.options import TranslateOptions
from seq2seq.serve.handling import ServerSettings, authorize
from seq2seq.serve.protocol import ApiError, translate_args

SUPPORTED = (
    *(".txt", ".html", ".htm", ".md", ".markdown", ".srt", ".po", ".pot", ".xlf", ".xliff"),
    *(".docx", ".pptx", ".xlsx", ".odt", ".odp", ".ods", ".epub"),
)
KEPT_FILES = 100
MEDIA_TYPES = {
    "text": "text/plain",
    "html": "text/html",
    "markdown": "text/markdown",
    "srt": "application/x-subrip",
    "po": "text/x-gettext-translation",
    "xliff": "application/xliff+xml",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "odt": "application/vnd.oasis.opendocument.text",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "epub": "application/epub+zip",
}

# (request, texts, format, split, beam size, n-best) -> results with a .text each
TranslateTexts = Callable[..., Awaitable[list]]


def add_file_routes(
    app: FastAPI, settings: ServerSettings, translate_texts: TranslateTexts, translates: bool
) -> None:
    """The routes; their handlers are the methods of ``FileRoutes``."""
    routes = FileRoutes(settings, translate_texts, translates)
    app.add_api_route("/translate_file", routes.translate_file, methods=["POST"])
    app.add_api_route("/download_file/{key}", routes.download_file, methods=["GET"])


@dataclass(eq=False)  # handlers: compared and hashed as themselves
class FileRoutes:
    """The handlers, with what they share: the settings, the translator of texts, and the
    translated files kept for download (name, bytes, format under a key, oldest first)."""

    settings: ServerSettings
    translate_texts: TranslateTexts
    translates: bool
    kept: OrderedDict[str, tuple[str, bytes, str]] = field(default_factory=OrderedDict)

    async def translate_file(self, request: Request) -> dict:
        """A text, HTML, Markdown or SRT file translated with its markup kept."""
        form = await _form(request)
        authorize(self.settings, form.get("api_key"), request)
        limit = self.settings.file_limit
        upload, name, extension = _checked_upload(form.get("file"), limit)
        text_format = EXTENSIONS[extension]
        data = await upload.read()
        decoded = None if text_format in ZIPPED else _decoded(data, text_format, name, limit)
        checked = translate_args(
            {"q": "", "source": form.get("source"), "target": form.get("target")},
            self.settings.limits,
        )  # the languages, checked as /translate checks them
        if not self.translates:
            raise ApiError(400, "this model is a language model, not a translator")
        options = TranslateOptions(
            beam_size=self.settings.beam_size, format=text_format, target=checked.target
        )
        if decoded is None:  # a zipped document: its parts translated, the file written whole
            documents, write = await asyncio.to_thread(_zipped, data, text_format, name, limit)
            results = await self.translate_texts(request, documents, options)
            body = await asyncio.to_thread(write, [result.text for result in results])
        else:
            [result] = await self.translate_texts(request, [decoded.text], options)
            body = encode_document(result.text, text_format, decoded)  # UTF-8, declared so
        key = self._keep(name, body, text_format)
        return {
            "translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{quote(key)}"
        }

    def _keep(self, name: str, body: bytes, text_format: str) -> str:
        """The key a translated file is kept under; the oldest beyond ``KEPT_FILES`` go."""
        key = f"{uuid.uuid4().hex}.{name}"
        self.kept[key] = (name, body, text_format)
        while len(self.kept) > KEPT_FILES:
            self.kept.popitem(last=False)
        return key

    async def download_file(self, key: str) -> Response:
        # No docstring: FastAPI would publish it as the route's OpenAPI description.
        if key not in self.kept:
            raise ApiError(
                404,
                "Invalid filename: no such translated file (files are kept for "
                f"the newest {KEPT_FILES} translations)",
            )
        name, body, text_format = self.kept[key]
        disposition = f"attachment; filename*=UTF-8''{quote(name)}"
        charset = "" if text_format in ZIPPED else "; charset=utf-8"
        return Response(
            body,
            media_type=MEDIA_TYPES[text_format] + charset,
            headers={"Content-Disposition": disposition},
        )


def _checked_upload(upload: UploadFile | str | None, limit: int) -> tuple[UploadFile, str, str]:
    """The uploaded file, its name and its extension (lower case), once checked to be a
    file of a supported format that may fit within ``limit`` characters."""
    if upload is None or isinstance(upload, str):
        raise ApiError(400, "Invalid request: missing file parameter", "file")
    name = PurePath(upload.filename or "").name
    if not name:
        raise ApiError(400, "Invalid request: empty file", "file")
    extension = PurePath(name).suffix.lower()
    if extension not in SUPPORTED:
        raise ApiError(
            400,
            f"Invalid request: file format not supported ({extension or name}; "
            f"supported: {', '.join(SUPPORTED)})",
            "file",
        )
    # At most 4 bytes a character (UTF-8, UTF-32), after a byte-order mark of at most 4; a
    # zipped document's text is counted once read (its images may weigh more than its text).
    zipped = EXTENSIONS[extension] in ZIPPED
    if upload.size is not None and upload.size > 4 * limit + 4 and not zipped:
        raise ApiError(
            400,
            f"Invalid request: file ({upload.size} bytes) exceeds file limit ({limit} characters)",
            "file",
        )
    return upload, name, extension


async def _form(request: Request):
    if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        raise ApiError(400, "Invalid request: send the file as multipart/form-data", "file")
    try:
        return await request.form()
    except Exception as error:  # a broken multipart body is the client's mistake
        raise ApiError(400, f"Invalid request: malformed form body ({error})") from None


def _decoded(data: bytes, text_format: str, name: str, limit: int) -> Decoded:
    """The file as text, in whatever encoding it came (``decode_document``), within ``limit``
    characters; a binary file, or one its byte-order mark miscalls, is a 400."""
    try:
        decoded = decode_document(data, text_format, name)
    except DataError as error:
        raise ApiError(400, f"Invalid request: {error}", "file") from None
    if len(decoded.text) > limit:
        raise ApiError(
            400,
            f"Invalid request: file ({len(decoded.text)} characters) exceeds file limit ({limit})",
            "file",
        )
    return decoded


def _zipped(
    data: bytes, text_format: str, name: str, limit: int
) -> tuple[list[Document], Callable[[list[str]], bytes]]:
    """A zipped document's parts (``read_zipped``), their text within ``limit`` characters;
    a file that is not one, or a corrupt or unsafe one, is a 400."""
    try:
        documents, write = read_zipped(data, text_format, name)
    except DataError as error:
        raise ApiError(400, f"Invalid request: {error}", "file") from None
    size = sum(len(s.text) for document in documents for s in segments(document))
    if size > limit:
        raise ApiError(
            400,
            f"Invalid request: file ({size} characters) exceeds file limit ({limit})",
            "file",
        )
    return documents, write
