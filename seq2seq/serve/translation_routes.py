"""The translation routes: LibreTranslate's ``/translate``, ``/languages`` and ``/detect``, and
our ``/v1/translate`` (n-best lists, scores, attention)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from seq2seq.decoding.search import Hypothesis
from seq2seq.errors import DataError
from seq2seq.formats import parse
from seq2seq.inference.documents import SentenceTranslation, TextBatch
from seq2seq.inference.glossary import Glossary, Term
from seq2seq.inference.translator import cut_source
from seq2seq.serve.files import add_file_routes
from seq2seq.serve.handling import ServerSettings, authorize, submit, wait_for
from seq2seq.serve.protocol import (
    MAX_BEAM,
    ApiError,
    detect_languages,
    detected_language,
    languages,
    parse_body,
    translate_args,
    valid_text,
)
from seq2seq.serve.served_model import ServedModel, TranslatedSentence, TranslationWork
from seq2seq.serve.worker import BatchingWorker, Job


class NativeTranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | list[str]
    beam_size: int | None = Field(None, ge=1, le=MAX_BEAM)
    n_best: int = Field(1, ge=1, le=MAX_BEAM)
    return_scores: bool = False
    return_attention: bool = False
    format: Literal["text", "html", "markdown", "srt"] = "text"
    split: bool = True
    glossary: dict[str, str] | str | None = None  # {English: Chinese} or TSV lines
    api_key: str | None = None


@dataclass
class TextResult:
    """One text of a request, translated: its best text, the texts of its other n-best
    hypotheses (alternatives), the hypotheses, whether a sentence in it could not be
    translated whole (cut into windows), and the glossary terms its text lacks."""

    text: str
    alternatives: list[str]
    hypotheses: list[Hypothesis]
    windowed: bool
    missing: list[Term] = field(default_factory=list)


def not_whole_warning(indices: list[int], limit: int, batch: bool = True) -> str:
    shown = ", ".join(f"q[{i}]" for i in indices[:20]) if batch else "q"
    return (f"{shown}: a sentence longer than the model's {limit} tokens with no clause "
            "punctuation was translated in windows, not as a whole")  # fmt: skip


def missing_terms_warning(results: list[TextResult], batch: bool = True) -> str | None:
    """Never silent: the texts whose translation lacks a glossary term, and the terms."""
    lacking = [(i, r.missing) for i, r in enumerate(results) if r.missing]
    if not lacking:
        return None
    shown = ", ".join(f"q[{i}]" for i, _ in lacking[:20]) if batch else "q"
    terms = ", ".join(dict.fromkeys(t.source for _, missing in lacking for t in missing))
    return (f"{shown}: glossary term(s) not placed within the length limit: {terms}")


def request_glossary(value: Any, field_name: str = "glossary") -> Glossary | None:
    """An inline glossary (our extension of LibreTranslate's and our own request): an object
    {English: Chinese} or TSV lines; a bad entry is a 400 naming it."""
    if value is None or value == "" or value == {}:
        return None
    try:
        if isinstance(value, dict):
            return Glossary.from_dict(value, field_name)
        if isinstance(value, str):
            return Glossary.parse(value, field_name)
    except DataError as error:
        raise ApiError(400, f"Invalid request: {error}", field_name) from None
    raise ApiError(400, f"Invalid request: {field_name} must be an object of English: Chinese "
                        "terms or TSV lines", field_name)  # fmt: skip


def add_translation_routes(app: FastAPI, served: ServedModel, settings: ServerSettings,
                            worker: BatchingWorker):  # noqa: ANN201 (returns translate_texts)  # fmt: skip
    """The routes; returns ``translate_texts``, which DeepL's ``/v2/translate`` shares."""
    async def translate(request: Request, lines: list[str], beam_size: int, n_best: int,
                        attention: bool = False) -> list[TranslatedSentence]:  # fmt: skip
        """Each line decoded whole as one sentence (attention maps)."""
        translator = _translator()
        limit = translator.engine.source_limit()
        # attention is drawn for the model's window (a Marian source keeps its eos)
        encoded = [cut_source(translator.encode_sentence(line), limit, translator.tokenizer)
                   for line in lines]  # fmt: skip
        return await _decode(request, encoded, beam_size, n_best, attention)

    def _translator():
        if served.translator is None:
            raise ApiError(400, f"{served.name} is a language model, not a translator: use "
                                "POST /v1/completions")  # fmt: skip
        return served.translator

    async def _decode(request: Request, encoded: list[list[int]], beam_size: int, n_best: int,
                      attention: bool = False,
                      constraints: list | None = None) -> list[TranslatedSentence]:  # fmt: skip
        request.state.sentences = getattr(request.state, "sentences", 0) + sum(map(bool, encoded))
        if not any(encoded):
            return [TranslatedSentence([]) for _ in encoded]
        # Constrained requests decode in whole batches of their own (never the continuous one).
        kind = "translate" if constraints is None else "constrained"
        job = Job(key=(kind, beam_size, n_best, attention), size=sum(map(bool, encoded)),
                  cost=sum(map(len, encoded)) * beam_size,
                  payload=TranslationWork(encoded, attention, constraints))  # fmt: skip
        return await wait_for(request, submit(worker, job))

    async def translate_texts(request: Request, texts: list[str], text_format: str, split: bool,
                              beam_size: int, n_best: int,
                              glossary: Glossary | None = None) -> list[TextResult]:  # fmt: skip
        """Texts in a format: split into sentences, each distinct one decoded once (pieces
        for the over-long), markup placed by alignment (in the worker thread), rebuilt;
        ``glossary``: terms forced where their English side occurs."""
        translator = _translator()

        def prepare() -> tuple[TextBatch, list, list, list | None]:
            try:
                documents = [parse(valid_text(text), text_format, "q") for text in texts]
            except DataError as error:
                raise ApiError(400, f"Invalid request: {error}", "q") from None
            batch = TextBatch(documents, split)
            plans = translator.plan(batch.sentences)
            terms = translator.piece_terms(batch.sentences, plans, glossary)
            try:
                return batch, plans, terms, translator.constraints(terms)
            except ValueError as error:  # a CTranslate2 engine
                raise ApiError(400, f"Invalid request: {error}", "glossary") from None

        # Parsing, splitting and rebuilding a large file take a second: off the event loop.
        batch, plans, terms, constraints = await asyncio.to_thread(prepare)
        encoded = [piece.ids for plan in plans for piece in plan]
        found = [s.hypotheses for s in await _decode(request, encoded, beam_size, n_best,
                                                     constraints=constraints)]  # fmt: skip
        if any(batch.aligned):
            job = Job(key=("finish",), size=len(batch.sentences), cost=1,
                      payload=(batch.sentences, plans, found, n_best, batch.aligned,
                               terms))  # fmt: skip
            finished = await wait_for(request, submit(worker, job))
        else:
            finished = await asyncio.to_thread(translator.finish, batch.sentences, plans, found,
                                               n_best, None, terms)  # fmt: skip
        return await asyncio.to_thread(_results, batch, finished, n_best)

    add_file_routes(app, settings, translate_texts, served.translates)

    @app.post("/translate")
    @app.get("/translate", include_in_schema=False)
    async def libre_translate(request: Request) -> JSONResponse:
        """LibreTranslate's /translate: q (string or array), source, target, format,
        alternatives, api_key; from JSON, a form or the query string."""
        args = await _libre_arguments(request)
        authorize(settings, args.get("api_key"), request)
        checked = translate_args(args, settings.limits)
        glossary = request_glossary(args.get("glossary"))
        n_best = checked.alternatives + 1
        beam = max(settings.beam_size, n_best)
        texts = checked.texts
        if checked.format == "text":  # line endings as LibreTranslate reads them
            texts = [text.replace("\r\n", "\n").replace("\r", "\n") for text in texts]
        found = await translate_texts(request, texts, checked.format, True, beam, n_best,
                                      glossary)  # fmt: skip
        texts = [result.text for result in found]
        alternatives = [result.alternatives for result in found]
        answer: dict[str, Any] = {"translatedText": texts if checked.batch else texts[0]}
        if checked.alternatives:
            answer["alternatives"] = alternatives if checked.batch else alternatives[0]
        if checked.detect:
            detected = [detected_language(text) for text in checked.texts]
            answer["detectedLanguage"] = detected if checked.batch else detected[0]
        warnings = []
        windowed = [i for i, result in enumerate(found) if result.windowed]
        if windowed:  # never silent: what could not be translated whole is said
            limit = _translator().engine.source_limit()
            warnings.append(not_whole_warning(windowed, limit, checked.batch))
        if glossary is not None:
            missing = [[t.source for t in result.missing] for result in found]
            answer["glossaryTermsNotMet"] = missing if checked.batch else missing[0]
            if lacking := missing_terms_warning(found, checked.batch):
                warnings.append(lacking)
        if warnings:
            answer["warnings"] = warnings
        return JSONResponse(answer)

    @app.get("/languages")
    @app.post("/languages", include_in_schema=False)
    async def libre_languages() -> list[dict[str, Any]]:
        """What the model translates: English to Chinese (none for a language model)."""
        return languages() if served.translates else []

    @app.post("/detect")
    async def libre_detect(request: Request) -> list[dict[str, Any]]:
        """LibreTranslate's /detect: the languages of q by script, most confident first
        (``protocol.detect_languages``); an empty q is a 400, as there."""
        args = await _libre_arguments(request)
        authorize(settings, args.get("api_key"), request)
        if not args.get("q") or not isinstance(args["q"], str):
            raise ApiError(400, "Invalid request: missing q parameter", "q")
        return detect_languages(args["q"])

    @app.post("/v1/translate")
    async def native_translate(body: NativeTranslateRequest, request: Request) -> dict:
        """Each text as one segment: n-best hypotheses with scores, and cross-attention."""
        authorize(settings, body.api_key, request)
        texts = body.text if isinstance(body.text, list) else [body.text]
        settings.limits.check(texts)
        if body.return_attention and not served.attention:
            raise ApiError(400, "return_attention needs a torch engine (not CTranslate2)")
        beam = max(body.beam_size or settings.beam_size, body.n_best)
        asked, warnings = body.beam_size, []
        if asked is not None and beam > asked:  # never silent: the answer differs from the ask
            warnings.append(f"beam_size {asked} raised to {beam} to return n_best {body.n_best} "
                            "(a beam finds at most beam_size hypotheses)")  # fmt: skip
        if body.return_attention and body.format != "text":
            raise ApiError(400, "Invalid request: return_attention takes plain text (format: "
                                "text)", "return_attention")  # fmt: skip
        glossary = request_glossary(body.glossary)
        if body.return_attention and glossary is not None:
            raise ApiError(400, "Invalid request: return_attention takes no glossary",
                           "glossary")  # fmt: skip
        if body.return_attention:  # attention is drawn over one sentence: each text whole
            lines = [" ".join(valid_text(text).split()) for text in texts]
            sentences = await translate(request, lines, beam, body.n_best, True)
            results = [TextResult(served.text(s.hypotheses[0]) if s.hypotheses else "",
                                  [served.text(h) for h in s.hypotheses[1:]], s.hypotheses,
                                  False) for s in sentences]  # fmt: skip
        else:
            results = await translate_texts(request, texts, body.format, body.split, beam,
                                            body.n_best, glossary)  # fmt: skip
            sentences = [TranslatedSentence(r.hypotheses) for r in results]
        out = []
        for result, sentence in zip(results, sentences, strict=True):
            item: dict[str, Any] = {"text": result.text}
            if body.return_scores or body.n_best > 1:
                ranked = [result.text, *result.alternatives]
                item["hypotheses"] = [
                    {"text": ranked[min(k, len(ranked) - 1)], "score": round(h.score, 4),
                     "log_prob": round(h.log_prob, 4), "tokens": len(h.tokens)}
                    for k, h in enumerate(result.hypotheses)
                ]  # fmt: skip
            if body.return_attention:
                item["attention"] = sentence.attention
            if result.windowed:
                item["windowed"] = True
            if glossary is not None:
                item["glossary_terms_not_met"] = [t.source for t in result.missing]
            out.append(item)
        if lacking := missing_terms_warning(results):
            warnings.append(lacking)
        answer = {"model": served.name, "beam_size": beam, "translations": out}
        return {**answer, "warnings": warnings} if warnings else answer

    return translate_texts


def _results(batch: TextBatch, finished: list[SentenceTranslation],
             n_best: int) -> list[TextResult]:  # fmt: skip
    """Each text's best translation, its n-best hypotheses (the best combinations of its
    sentences' hypotheses, ``TextBatch.n_best``) and their texts as alternatives."""
    results = []
    for index, text in enumerate(batch.rebuild(finished)):
        ids = [i for segment in batch.segment_sentences(index) for i in segment]
        hypotheses = batch.n_best(index, finished, n_best) if ids else []
        missing = list(dict.fromkeys(t for i in ids for t in finished[i].missing))
        results.append(TextResult(text, [h.text for h in hypotheses[1:]], hypotheses,
                                  any(finished[i].windowed for i in ids), missing))  # fmt: skip
    return results


async def _libre_arguments(request: Request) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "")
    query = dict(request.query_params)
    if content_type.lower().startswith("multipart/form-data"):
        try:
            form = await request.form()
        except Exception as error:  # a broken multipart body is the client's mistake
            raise ApiError(400, f"Invalid request: malformed form body ({error})") from None
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        return parse_body(b"", "", {**query, **fields})
    return parse_body(await request.body(), content_type, query)
