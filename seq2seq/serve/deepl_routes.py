"""DeepL's API, so that DeepL's clients (``pip install deepl``: ``deepl.Translator(key,
server_url=URL)``, ``deepl.DeepLClient``) and the tools built on them work unchanged.

- ``POST /v2/translate``: ``text`` (list), ``target_lang`` ZH or ZH-HANS, ``source_lang`` EN
  or none (answered as detected EN), ``split_sentences``, ``tag_handling`` html, a glossary;
  ``glossary_terms_not_met`` (the English sides of terms the translation could not be made to
  hold) and ``windowed`` (a sentence too long to translate whole) are our additions to a
  translation, and DeepL's clients ignore fields they do not know.
- glossaries, EN to ZH only: ``/v2/glossaries`` (create, list, get, entries as TSV, delete)
  and the multilingual ``/v3/glossaries`` (also rename, replace or merge the dictionary, delete
  it); both show the same glossaries (``glossaries.GlossaryStore``).
- ``/v2/languages``, ``/v2/glossary-language-pairs``, ``/v2/usage`` (the characters translated
  since the server started, against a limit no server reaches: nothing is billed here).

Keys: ``Authorization: DeepL-Auth-Key KEY`` (or an ``auth_key`` parameter, as older clients
send it), checked against ``--api-keys`` when the server has them. Errors are DeepL's
``{"message": "..."}`` (``app._error_response``), with its status codes, which the clients
turn into their exceptions: 400 bad request, 403 key, 404 no such glossary, 413 too large,
456 too many glossaries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from seq2seq.errors import DataError
from seq2seq.inference.glossary import Glossary
from seq2seq.serve.files import TranslateTexts
from seq2seq.serve.glossaries import (
    MAX_ENTRIES,
    MAX_ENTRIES_BYTES,
    MAX_NAME_BYTES,
    GlossaryStore,
    StoredGlossary,
    StoreFull,
    merged,
)
from seq2seq.serve.handling import ServerSettings
from seq2seq.serve.protocol import ApiError
from seq2seq.serve.served_model import ServedModel

TARGETS = {"ZH": "Chinese (simplified)", "ZH-HANS": "Chinese (simplified)"}
CHARACTER_LIMIT = 10**15  # /v2/usage's limit: none here, and clients read "limit reached"
# Parameters with a meaning we cannot honour: refused, never silently dropped.
REFUSED = {"ignore_tags": "translating all text (ignore_tags)",
           "style_id": "style rules (style_id)",
           "translation_memory_id": "translation memories (translation_memory_id)",
           "custom_instructions": "custom instructions"}  # fmt: skip
# Accepted and ignored, as having no meaning for this model: context (no context-conditioned
# decoding), preserve_formatting (the output's formatting is never corrected), model_type (one
# model), formality default/prefer_more/prefer_less (Chinese has no formality setting, as at
# DeepL; "more"/"less" are refused there and here), outline_detection, splitting_tags,
# non_splitting_tags, tag_handling_version (XML tag handling, which is refused), and any
# parameter this server does not know (DeepL ignores those too).
FORMALITY_REFUSED = ("more", "less", "formal", "informal")


@dataclass
class Usage:
    """Characters sent to ``/v2/translate`` since the server started."""

    characters: int = 0


def add_deepl_routes(app: FastAPI, served: ServedModel, settings: ServerSettings,
                     translate_texts: TranslateTexts, store: GlossaryStore) -> None:  # fmt: skip
    usage = Usage()

    async def arguments(request: Request) -> dict[str, Any]:
        """The request's parameters, once its key has been checked."""
        args = await _arguments(request)
        authorize_deepl(settings, deepl_key(request, args))
        return args

    @app.post("/v2/translate")
    async def translate(request: Request) -> JSONResponse:
        """DeepL's text translation, EN to ZH."""
        args = await arguments(request)
        if not served.translates:
            raise ApiError(400, f"{served.name} is a language model, not a translator: use "
                                "POST /v1/completions")  # fmt: skip
        texts = _texts(args)
        _languages(args)
        text_format = _tag_handling(args.get("tag_handling"))
        split, no_newlines = _split_sentences(args.get("split_sentences"))
        _refuse_unsupported(args)
        glossary = _glossary(args, store)
        billed = _flag(args.get("show_billed_characters"), "show_billed_characters")
        settings.limits.check(texts)
        sent = [text.replace("\r\n", "\n").replace("\r", "\n") for text in texts]
        if no_newlines and text_format == "text":
            sent = [text.replace("\n", " ") for text in sent]
        results = await translate_texts(request, sent, text_format, split, settings.beam_size, 1,
                                        glossary=glossary)  # fmt: skip
        usage.characters += sum(map(len, texts))
        out = []
        for text, result in zip(texts, results, strict=True):
            item: dict[str, Any] = {"detected_source_language": "EN", "text": result.text}
            if billed:
                item["billed_characters"] = len(text)
            if result.missing:  # the English sides, as the glossary's entries have them
                item["glossary_terms_not_met"] = [term.source for term in result.missing]
            if result.windowed:
                item["windowed"] = True
            out.append(item)
        return JSONResponse({"translations": out})

    @app.api_route("/v2/languages", methods=["GET", "POST"])
    async def languages(request: Request) -> list[dict[str, Any]]:
        """type=source (the default): EN; type=target: ZH and ZH-HANS."""
        args = await arguments(request)
        kind = args.get("type") or "source"
        if kind not in ("source", "target"):
            raise ApiError(400, f"Value for 'type' not supported: {kind} (source or target)")
        if not served.translates:
            return []
        if kind == "source":
            return [{"language": "EN", "name": "English"}]
        return [{"language": code, "name": name, "supports_formality": False}
                for code, name in TARGETS.items()]  # fmt: skip

    @app.api_route("/v2/glossary-language-pairs", methods=["GET", "POST"])
    async def glossary_language_pairs(request: Request) -> dict:
        await arguments(request)
        return {"supported_languages": [{"source_lang": "en", "target_lang": "zh"}]}

    @app.api_route("/v2/usage", methods=["GET", "POST"])
    async def get_usage(request: Request) -> dict:
        """The characters translated since the server started; the limit is never reached."""
        await arguments(request)
        return {"character_count": usage.characters, "character_limit": CHARACTER_LIMIT}

    _add_v2_glossary_routes(app, store, arguments)
    _add_v3_glossary_routes(app, store, arguments)


# -- glossaries, v2 (one language pair each) -------------------------------------------------


def _add_v2_glossary_routes(app: FastAPI, store: GlossaryStore, arguments) -> None:  # noqa: ANN001
    @app.post("/v2/glossaries", status_code=201)
    async def create_glossary(request: Request) -> JSONResponse:
        args = await arguments(request)
        name = _name(args.get("name"))
        _glossary_pair(args.get("source_lang"), args.get("target_lang"))
        glossary = _entries(args.get("entries"), args.get("entries_format"))
        return JSONResponse(_v2_info(_create(store, name, glossary)), status_code=201)

    @app.get("/v2/glossaries")
    async def list_glossaries(request: Request) -> dict:
        await arguments(request)
        return {"glossaries": [_v2_info(stored) for stored in store.list()]}

    @app.get("/v2/glossaries/{glossary_id}")
    async def get_glossary(glossary_id: str, request: Request) -> dict:
        await arguments(request)
        return _v2_info(_found(store, glossary_id))

    @app.get("/v2/glossaries/{glossary_id}/entries")
    async def glossary_entries(glossary_id: str, request: Request) -> Response:
        """The entries as TSV (DeepL's one format here, whatever the Accept header says)."""
        await arguments(request)
        tsv = _found(store, glossary_id).glossary.to_tsv()
        return Response(tsv, media_type="text/tab-separated-values; charset=utf-8")

    @app.delete("/v2/glossaries/{glossary_id}", status_code=204)
    async def delete_glossary(glossary_id: str, request: Request) -> Response:
        await arguments(request)
        if not store.delete(glossary_id):
            raise _not_found(glossary_id)
        return Response(status_code=204)


def _v2_info(stored: StoredGlossary) -> dict[str, Any]:
    return {"glossary_id": stored.glossary_id, "name": stored.name, "ready": True,
            "source_lang": stored.source_lang, "target_lang": stored.target_lang,
            "creation_time": stored.creation_time,
            "entry_count": len(stored.glossary)}  # fmt: skip


# -- glossaries, v3 (a list of dictionaries; here at most the one EN->ZH) -----------------


def _add_v3_glossary_routes(app: FastAPI, store: GlossaryStore, arguments) -> None:  # noqa: ANN001
    @app.post("/v3/glossaries", status_code=201)
    async def create_glossary(request: Request) -> JSONResponse:
        args = await arguments(request)
        name = _name(args.get("name"))
        dictionaries = args.get("dictionaries")
        if not isinstance(dictionaries, list) or len(dictionaries) != 1:
            raise ApiError(400, "Invalid request: 'dictionaries' must hold one dictionary, EN "
                                "to ZH (this server's only glossary language pair)")  # fmt: skip
        glossary = _dictionary(dictionaries[0])
        return JSONResponse(_v3_info(_create(store, name, glossary)), status_code=201)

    @app.get("/v3/glossaries")
    async def list_glossaries(request: Request) -> dict:
        await arguments(request)
        return {"glossaries": [_v3_info(stored) for stored in store.list()]}

    @app.get("/v3/glossaries/{glossary_id}")
    async def get_glossary(glossary_id: str, request: Request) -> dict:
        await arguments(request)
        return _v3_info(_found(store, glossary_id))

    @app.get("/v3/glossaries/{glossary_id}/entries")
    async def glossary_entries(glossary_id: str, request: Request) -> dict:
        args = await arguments(request)
        stored = _found(store, glossary_id)
        if not stored.glossary or not _is_our_pair(args.get("source_lang") or "en",
                                                   args.get("target_lang") or "zh"):  # fmt: skip
            raise ApiError(
                404,
                f"Glossary dictionary not found: {glossary_id} has "
                f"{'an EN to ZH dictionary' if stored.glossary else 'none'}",
            )
        return {"dictionaries": [{"source_lang": "en", "target_lang": "zh",
                                  "entries": stored.glossary.to_tsv(),
                                  "entries_format": "tsv"}]}  # fmt: skip

    @app.patch("/v3/glossaries/{glossary_id}")
    async def update_glossary(glossary_id: str, request: Request) -> dict:
        """A new name, and/or entries merged into the dictionary (a new term replaces the
        old one with the same words)."""
        args = await arguments(request)
        stored = _found(store, glossary_id)
        name = _name(args["name"]) if "name" in args else None
        dictionaries = args.get("dictionaries") or []
        if not isinstance(dictionaries, list) or len(dictionaries) > 1:
            raise ApiError(400, "Invalid request: 'dictionaries' may hold one dictionary, EN "
                                "to ZH")  # fmt: skip
        glossary = None
        if dictionaries:
            glossary = merged(stored.glossary, _dictionary(dictionaries[0]))
            _check_size(glossary)
        return _v3_info(_updated(store, glossary_id, name, glossary))

    @app.put("/v3/glossaries/{glossary_id}/dictionaries")
    async def replace_dictionary(glossary_id: str, request: Request) -> dict:
        args = await arguments(request)
        _found(store, glossary_id)
        stored = _updated(store, glossary_id, None, _dictionary(args))
        return _v3_dictionaries(stored)[0]

    @app.delete("/v3/glossaries/{glossary_id}/dictionaries", status_code=204)
    async def delete_dictionary(glossary_id: str, request: Request) -> Response:
        args = await arguments(request)
        stored = _found(store, glossary_id)
        if not stored.glossary or not _is_our_pair(args.get("source_lang"),
                                                   args.get("target_lang")):  # fmt: skip
            raise ApiError(404, f"Glossary dictionary not found in {glossary_id}")
        _updated(store, glossary_id, None, Glossary([]))
        return Response(status_code=204)

    @app.delete("/v3/glossaries/{glossary_id}", status_code=204)
    async def delete_glossary(glossary_id: str, request: Request) -> Response:
        await arguments(request)
        if not store.delete(glossary_id):
            raise _not_found(glossary_id)
        return Response(status_code=204)


def _v3_info(stored: StoredGlossary) -> dict[str, Any]:
    return {"glossary_id": stored.glossary_id, "name": stored.name,
            "dictionaries": _v3_dictionaries(stored),
            "creation_time": stored.creation_time}  # fmt: skip


def _v3_dictionaries(stored: StoredGlossary) -> list[dict[str, Any]]:
    """The glossary's dictionary, or none once it has been deleted."""
    if not stored.glossary:
        return []
    return [{"source_lang": stored.source_lang, "target_lang": stored.target_lang,
             "entry_count": len(stored.glossary)}]  # fmt: skip


def _dictionary(value: Any) -> Glossary:
    """A v3 dictionary (``source_lang``, ``target_lang``, ``entries``, ``entries_format``)."""
    if not isinstance(value, dict):
        raise ApiError(400, "Invalid request: a dictionary must be an object")
    _glossary_pair(value.get("source_lang"), value.get("target_lang"))
    return _entries(value.get("entries"), value.get("entries_format"))


# -- glossary parts --------------------------------------------------------------------------


def _create(store: GlossaryStore, name: str, glossary: Glossary) -> StoredGlossary:
    try:
        return store.create(name, glossary)
    except StoreFull as error:  # DeepL's answer when an account holds too many glossaries
        raise ApiError(456, f"Quota exceeded: {error}") from None


def _updated(store: GlossaryStore, glossary_id: str, name: str | None,
             glossary: Glossary | None) -> StoredGlossary:  # fmt: skip
    stored = store.update(glossary_id, name, glossary)
    if stored is None:  # deleted meanwhile
        raise _not_found(glossary_id)
    return stored


def _found(store: GlossaryStore, glossary_id: str) -> StoredGlossary:
    stored = store.get(glossary_id)
    if stored is None:
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
        raise ApiError(400, "Invalid request: the glossary needs 'source_lang' and "
                            "'target_lang'")  # fmt: skip
    if not _is_our_pair(source, target):
        raise ApiError(400, f"Unsupported glossary language pair: {source} to {target} (this "
                            "server's glossaries are EN to ZH)")  # fmt: skip


def _entries(entries: Any, entries_format: Any) -> Glossary:
    """The terms of ``entries`` (TSV, or CSV with ``entries_format`` csv), within the limits.

    Bad entries are a 400 whose message is the one-line ``DataError``, e.g.
    ``entries:3: expected 2 tab-separated fields (source, target), found 1``.
    """
    entries_format = str(entries_format or "tsv").lower()
    if entries_format not in ("tsv", "csv"):
        raise ApiError(400, f"Value for 'entries_format' not supported: {entries_format} (tsv "
                            "or csv)")  # fmt: skip
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
                raise ApiError(400, f"entries: term {side[:40]!r}... exceeds {MAX_NAME_BYTES} "
                                    "bytes")  # fmt: skip
    _check_size(glossary)
    return glossary


def _check_size(glossary: Glossary) -> None:
    if len(glossary) > MAX_ENTRIES:
        raise ApiError(413, f"Glossary has {len(glossary)} entries, over this server's limit of "
                            f"{MAX_ENTRIES}")  # fmt: skip


# -- translate parameters --------------------------------------------------------------------


def _texts(args: dict[str, Any]) -> list[str]:
    text = args.get("text")
    texts = [text] if isinstance(text, str) else text
    if not texts:
        raise ApiError(400, "Parameter 'text' not specified.")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ApiError(400, "Invalid request: 'text' must be an array of strings")
    return texts


def _languages(args: dict[str, Any]) -> None:
    """EN (or none, detected as EN) to ZH or ZH-HANS."""
    target = args.get("target_lang")
    if not target:
        raise ApiError(400, "Parameter 'target_lang' not specified.")
    if str(target).upper() not in TARGETS:
        raise ApiError(400, f"Value for 'target_lang' not supported: {target} (this server "
                            f"translates into {', '.join(TARGETS)})")  # fmt: skip
    source = args.get("source_lang")
    if source and str(source).upper() != "EN":
        raise ApiError(400, f"Value for 'source_lang' not supported: {source} (this server "
                            "translates from EN)")  # fmt: skip


def _tag_handling(value: Any) -> str:
    """Our text format: html for ``tag_handling`` html, else plain text; xml is refused."""
    if value in (None, ""):
        return "text"
    if str(value).lower() == "html":
        return "html"
    if str(value).lower() == "xml":
        raise ApiError(400, "tag_handling 'xml' is not supported by this server: send HTML "
                            "with tag_handling 'html', or plain text")  # fmt: skip
    raise ApiError(400, f"Value for 'tag_handling' not supported: {value} (html)")


def _split_sentences(value: Any) -> tuple[bool, bool]:
    """(split into sentences, newlines read as spaces): "0" takes each line whole, "1" (the
    default) splits on punctuation and newlines, "nonewlines" on punctuation only."""
    value = "1" if value in (None, "") else str(value).lower()
    if value not in ("0", "1", "nonewlines"):
        raise ApiError(400, f"Value for 'split_sentences' not supported: {value} (0, 1 or "
                            "nonewlines)")  # fmt: skip
    return value != "0", value == "nonewlines"


def _refuse_unsupported(args: dict[str, Any]) -> None:
    for name, what in REFUSED.items():
        if args.get(name) not in (None, "", []):
            raise ApiError(400, f"This server does not support {what}")
    formality = str(args.get("formality") or "default").lower()
    if formality in FORMALITY_REFUSED:
        raise ApiError(400, "'formality' is not supported for given 'target_lang' (use "
                            "prefer_more or prefer_less)")  # fmt: skip


def _glossary(args: dict[str, Any], store: GlossaryStore) -> Glossary | None:
    """The glossary of ``glossary_id`` (or a one-id ``glossary_ids``); DeepL requires
    ``source_lang`` with one."""
    ids = args.get("glossary_ids") or []
    if isinstance(ids, str):  # a form sends a comma-separated list
        ids = [part for part in ids.split(",") if part]
    if args.get("glossary_id"):
        ids = [args["glossary_id"], *ids]
    if not ids:
        return None
    if not args.get("source_lang"):
        raise ApiError(400, "Use of a glossary requires the 'source_lang' parameter to be "
                            "specified")  # fmt: skip
    if len(ids) > 1 or not isinstance(ids[0], str):
        raise ApiError(400, "This server applies one glossary per request")
    stored = _found(store, ids[0])
    return stored.glossary or None


def _flag(value: Any, name: str) -> bool:
    """A boolean parameter: JSON true/false, or a form's 1/0/true/false."""
    if value in (None, ""):
        return False
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("1", "true"):
        return True
    if str(value).lower() in ("0", "false"):
        return False
    raise ApiError(400, f"Value for '{name}' not supported: {value} (true or false)")


# -- requests and keys -----------------------------------------------------------------------


async def _arguments(request: Request) -> dict[str, Any]:
    """Parameters from the query string and a JSON or form body (DeepL's clients send a body
    with GET too); a form parameter given more than once (``text``) becomes a list."""
    pairs = list(request.query_params.multi_items())
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if kind == "application/json":
        try:
            data = json.loads(body)
        except ValueError as error:
            raise ApiError(400, f"Invalid request: malformed JSON body ({error})") from None
        if not isinstance(data, dict):
            raise ApiError(400, "Invalid request: the JSON body must be an object")
        return {**_grouped(pairs), **data}
    if kind == "multipart/form-data":
        try:
            form = await request.form()
        except Exception as error:  # a broken multipart body is the client's mistake
            raise ApiError(400, f"Invalid request: malformed form body ({error})") from None
        pairs += [(name, value) for name, value in form.multi_items() if isinstance(value, str)]
    elif body:
        pairs += parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return _grouped(pairs)


def _grouped(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name, value in pairs:
        if name not in args:
            args[name] = value
        elif isinstance(args[name], list):
            args[name].append(value)
        else:
            args[name] = [args[name], value]
    return args


def deepl_key(request: Request, args: dict[str, Any]) -> str | None:
    """The key of ``Authorization: DeepL-Auth-Key KEY``, else of an ``auth_key`` parameter."""
    scheme, _, key = request.headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "deepl-auth-key" and key.strip():
        return key.strip()
    given = args.get("auth_key")
    return given if isinstance(given, str) and given else None


def authorize_deepl(settings: ServerSettings, key: str | None) -> None:
    """With ``--api-keys``, a listed key; without, any key or none."""
    if settings.api_keys is None:
        return
    if key is None:
        raise ApiError(403, "Missing auth key: send the header 'Authorization: DeepL-Auth-Key "
                            "KEY'")  # fmt: skip
    if key not in settings.api_keys:
        raise ApiError(403, "Invalid auth key")
