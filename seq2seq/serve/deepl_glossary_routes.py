"""DeepL's glossary endpoints, EN to ZH only: ``/v2/glossaries`` (create, list, get, entries as
TSV, delete) and the multilingual ``/v3/glossaries`` (also rename, replace or merge the
dictionary, delete it); both show the same glossaries (``glossaries.GlossaryStore``). A full
store is DeepL's 456, entries over the limits a 413, an unknown glossary a 404."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from seq2seq.errors import DataError
from seq2seq.inference.glossary import Glossary
from seq2seq.serve.deepl_requests import Arguments
from seq2seq.serve.glossaries import (
    MAX_ENTRIES,
    MAX_ENTRIES_BYTES,
    MAX_NAME_BYTES,
    GlossaryStore,
    StoredGlossary,
    StoreFull,
    merged,
)
from seq2seq.serve.protocol import ApiError


def add_glossary_routes(app: FastAPI, store: GlossaryStore, arguments: Arguments) -> None:
    """The v2 routes, then the v3 ones; ``arguments`` reads a request once its key is checked."""
    v2 = V2GlossaryRoutes(store, arguments)
    app.add_api_route("/v2/glossaries", v2.create_glossary, methods=["POST"], status_code=201)
    app.add_api_route("/v2/glossaries", v2.list_glossaries, methods=["GET"])
    app.add_api_route("/v2/glossaries/{glossary_id}", v2.get_glossary, methods=["GET"])
    app.add_api_route("/v2/glossaries/{glossary_id}/entries", v2.glossary_entries, methods=["GET"])
    app.add_api_route(
        "/v2/glossaries/{glossary_id}", v2.delete_glossary, methods=["DELETE"], status_code=204
    )
    v3 = V3GlossaryRoutes(store, arguments)
    app.add_api_route("/v3/glossaries", v3.create_glossary, methods=["POST"], status_code=201)
    app.add_api_route("/v3/glossaries", v3.list_glossaries, methods=["GET"])
    app.add_api_route("/v3/glossaries/{glossary_id}", v3.get_glossary, methods=["GET"])
    app.add_api_route("/v3/glossaries/{glossary_id}/entries", v3.glossary_entries, methods=["GET"])
    app.add_api_route("/v3/glossaries/{glossary_id}", v3.update_glossary, methods=["PATCH"])
    app.add_api_route(
        "/v3/glossaries/{glossary_id}/dictionaries", v3.replace_dictionary, methods=["PUT"]
    )
    app.add_api_route(
        "/v3/glossaries/{glossary_id}/dictionaries",
        v3.delete_dictionary,
        methods=["DELETE"],
        status_code=204,
    )
    app.add_api_route(
        "/v3/glossaries/{glossary_id}", v3.delete_glossary, methods=["DELETE"], status_code=204
    )


class _GlossaryRoutes:
    """What the v2 and v3 handlers share: the store, reading a request, listing, getting and
    deleting; ``info`` is how a version shows a glossary."""

    def __init__(self, store: GlossaryStore, arguments: Arguments) -> None:
        self.store = store
        self.arguments = arguments

    @staticmethod
    def info(stored: StoredGlossary) -> dict[str, Any]:
        raise NotImplementedError

    async def list_glossaries(self, request: Request) -> dict:
        await self.arguments(request)
        return {"glossaries": [self.info(stored) for stored in self.store.list()]}

    async def get_glossary(self, glossary_id: str, request: Request) -> dict:
        await self.arguments(request)
        return self.info(found_glossary(self.store, glossary_id))

    async def delete_glossary(self, glossary_id: str, request: Request) -> Response:
        await self.arguments(request)
        if not self.store.delete(glossary_id):
            raise _not_found(glossary_id)
        return Response(status_code=204)


# -- glossaries, v2 (one language pair each) -------------------------------------------------


class V2GlossaryRoutes(_GlossaryRoutes):
    """``/v2/glossaries``: a glossary is one language pair and its entries."""

    @staticmethod
    def info(stored: StoredGlossary) -> dict[str, Any]:
        return {
            "glossary_id": stored.glossary_id,
            "name": stored.name,
            "ready": True,
            "source_lang": stored.source_lang,
            "target_lang": stored.target_lang,
            "creation_time": stored.creation_time,
            "entry_count": len(stored.glossary),
        }

    async def create_glossary(self, request: Request) -> JSONResponse:
        args = await self.arguments(request)
        name = _name(args.get("name"))
        _glossary_pair(args.get("source_lang"), args.get("target_lang"))
        glossary = _entries(args.get("entries"), args.get("entries_format"))
        return JSONResponse(self.info(_create(self.store, name, glossary)), status_code=201)

    async def glossary_entries(self, glossary_id: str, request: Request) -> Response:
        """The entries as TSV (DeepL's one format here, whatever the Accept header says)."""
        await self.arguments(request)
        tsv = found_glossary(self.store, glossary_id).glossary.to_tsv()
        return Response(tsv, media_type="text/tab-separated-values; charset=utf-8")


# -- glossaries, v3 (a list of dictionaries; here at most the one EN->ZH) -----------------


class V3GlossaryRoutes(_GlossaryRoutes):
    """``/v3/glossaries``: a glossary is a list of dictionaries, here at most the EN to ZH one."""

    @staticmethod
    def info(stored: StoredGlossary) -> dict[str, Any]:
        return {
            "glossary_id": stored.glossary_id,
            "name": stored.name,
            "dictionaries": _v3_dictionaries(stored),
            "creation_time": stored.creation_time,
        }

    async def create_glossary(self, request: Request) -> JSONResponse:
        args = await self.arguments(request)
        name = _name(args.get("name"))
        dictionaries = args.get("dictionaries")
        if not isinstance(dictionaries, list) or len(dictionaries) != 1:
            raise ApiError(
                400,
                "Invalid request: 'dictionaries' must hold one dictionary, EN "
                "to ZH (this server's only glossary language pair)",
            )
        glossary = _dictionary(dictionaries[0])
        return JSONResponse(self.info(_create(self.store, name, glossary)), status_code=201)

    async def glossary_entries(self, glossary_id: str, request: Request) -> dict:
        args = await self.arguments(request)
        stored = found_glossary(self.store, glossary_id)
        if not stored.glossary or not _is_our_pair(
            args.get("source_lang") or "en", args.get("target_lang") or "zh"
        ):
            raise ApiError(
                404,
                f"Glossary dictionary not found: {glossary_id} has "
                f"{'an EN to ZH dictionary' if stored.glossary else 'none'}",
            )
        return {
            "dictionaries": [
                {
                    "source_lang": "en",
                    "target_lang": "zh",
                    "entries": stored.glossary.to_tsv(),
                    "entries_format": "tsv",
                }
            ]
        }

    async def update_glossary(self, glossary_id: str, request: Request) -> dict:
        """A new name, and/or entries merged into the dictionary (a new term replaces the
        old one with the same words)."""
        args = await self.arguments(request)
        stored = found_glossary(self.store, glossary_id)
        name = _name(args["name"]) if "name" in args else None
        dictionaries = args.get("dictionaries") or []
        if not isinstance(dictionaries, list) or len(dictionaries) > 1:
            raise ApiError(400, "Invalid request: 'dictionaries' may hold one dictionary, EN to ZH")
        glossary = None
        if dictionaries:
            glossary = merged(stored.glossary, _dictionary(dictionaries[0]))
            _check_size(glossary)
        return self.info(_updated(self.store, glossary_id, name, glossary))

    async def replace_dictionary(self, glossary_id: str, request: Request) -> dict:
        args = await self.arguments(request)
        found_glossary(self.store, glossary_id)
        stored = _updated(self.store, glossary_id, None, _dictionary(args))
        return _v3_dictionaries(stored)[0]

    async def delete_dictionary(self, glossary_id: str, request: Request) -> Response:
        args = await self.arguments(request)
        stored = found_glossary(self.store, glossary_id)
        if not stored.glossary or not _is_our_pair(
            args.get("source_lang"), args.get("target_lang")
        ):
            raise ApiError(404, f"Glossary dictionary not found in {glossary_id}")
        _updated(self.store, glossary_id, None, Glossary([]))
        return Response(status_code=204)


def _v3_dictionaries(stored: StoredGlossary) -> list[dict[str, Any]]:
    """The glossary's dictionary, or none once it has been deleted."""
    if not stored.glossary:
        return []
    return [
        {
            "source_lang": stored.source_lang,
            "target_lang": stored.target_lang,
            "entry_count": len(stored.glossary),
        }
    ]


def _dictionary(value: Any) -> Glossary:
    """A v3 dictionary (``source_lang``, ``target_lang``, ``entries``, ``entries_format``)."""
    if not isinstance(value, dict):
        raise ApiError(400, "Invalid request: a dictionary must be an object")
    _glossary_pair(value.get("source_lang"), value.get("target_lang"))
    return _entries(value.get("entries"), value.get("entries_format"))


# -- glossary parts --------------------------------------------------------------------------


def found_glossary(store: GlossaryStore, glossary_id: str) -> StoredGlossary:
    """The stored glossary of ``glossary_id``, or a 404."""
    stored = store.get(glossary_id)
    if stored is None:
        raise _not_found(glossary_id)
    return stored


def _create(store: GlossaryStore, name: str, glossary: Glossary) -> StoredGlossary:
    try:
        return store.create(name, glossary)
    except StoreFull as error:  # DeepL's answer when an account holds too many glossaries
        raise ApiError(456, f"Quota exceeded: {error}") from None


def _updated(
    store: GlossaryStore, glossary_id: str, name: str | None, glossary: Glossary | None
) -> StoredGlossary:
    stored = store.update(glossary_id, name, glossary)
    if stored is None:  # deleted meanwhile
        raise _not_found(glossary_id)
    return stored


def _not_found(glossary_id: str) -> ApiError:
    return ApiError(404, f"Glossary not found: {glossary_id}")


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ApiError(400, "Invalid request: the glossary needs a 'name'")
    if len(value.encode("utf-8")) > MAX_NAME_BYTES:
        raise ApiError(400, f"Invalid request: the glossary name exceeds {MAX_NAME_BYTES} bytes")
    return value


def _is_our_pair(source: Any, target: Any) -> bool:
    """EN to ZH, in any case, a regional variant dropped as DeepL's clients drop it."""

    def base(code: Any) -> str:
        return str(code or "").split("-")[0].lower()

    return base(source) == "en" and base(target) == "zh" and str(target).upper() != "ZH-HANT"


def _glossary_pair(source: Any, target: Any) -> None:
    if not source or not target:
        raise ApiError(400, "Invalid request: the glossary needs 'source_lang' and 'target_lang'")
    if not _is_our_pair(source, target):
        raise ApiError(
            400,
            f"Unsupported glossary language pair: {source} to {target} (this "
            "server's glossaries are EN to ZH)",
        )


def _entries(entries: Any, entries_format: Any) -> Glossary:
    """The terms of ``entries`` (TSV, or CSV with ``entries_format`` csv), within the limits.

    Bad entries are a 400 whose message is the one-line ``DataError``, e.g.
    ``entries:3: expected 2 tab-separated fields (source, target), found 1``.
    """
    entries_format = str(entries_format or "tsv").lower()
    if entries_format not in ("tsv", "csv"):
        raise ApiError(
            400, f"Value for 'entries_format' not supported: {entries_format} (tsv or csv)"
        )
    if not isinstance(entries, str):
        raise ApiError(400, "Invalid request: the glossary needs 'entries' (a string)")
    if len(entries.encode("utf-8")) > MAX_ENTRIES_BYTES:
        raise ApiError(413, f"Glossary entries exceed {MAX_ENTRIES_BYTES} bytes")
    try:
        glossary = Glossary.parse(entries, "entries", entries_format)
    except DataError as error:
        raise ApiError(400, str(error)) from None
    if not glossary:
        raise ApiError(400, "Invalid request: no glossary entries given")
    for term in glossary:
        for side in (term.source, term.target):
            if len(side.encode("utf-8")) > MAX_NAME_BYTES:
                raise ApiError(
                    400, f"entries: term {side[:40]!r}... exceeds {MAX_NAME_BYTES} bytes"
                )
    _check_size(glossary)
    return glossary


def _check_size(glossary: Glossary) -> None:
    if len(glossary) > MAX_ENTRIES:
        raise ApiError(
            413, f"Glossary has {len(glossary)} entries, over this server's limit of {MAX_ENTRIES}"
        )
