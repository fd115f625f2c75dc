"""The translation routes: LibreTranslate's ``/translate``, ``/languages`` and ``/detect``, and
our ``/v1/translate`` (n-best lists, scores, attention)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from seq2seq.documents import SentenceTranslation, TextBatch
from seq2seq.errors import DataError
from seq2seq.formats import parse
from seq2seq.search import Hypothesis
from seq2seq.serve.batching import BatchingWorker, Job
from seq2seq.serve.files import add_file_routes
from seq2seq.serve.handling import ServerSettings, authorize, submit, wait_for
from seq2seq.serve.model import ServedModel, TranslatedSentence, TranslationWork
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
from seq2seq.translator import cut_source


class NativeTranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | list[str]
    beam_size: int | None = Field(None, ge=1, le=MAX_BEAM)
    n_best: int = Field(1, ge=1, le=MAX_BEAM)
    return_scores: bool = False
    return_attention: bool = False
    format: Literal["text", "html", "markdown", "srt"] = "text"
    split: bool = True
    api_key: str | None = None


@dataclass
class TextResult:
    """One text of a request, translated: its best text, the texts of its other n-best
    hypotheses (alternatives), the hypotheses, and whether a sentence in it could not be
    translated whole (cut into windows)."""

    text: str
    alternatives: list[str]
    hypotheses: list[Hypothesis]
    windowed: bool


def not_whole_warning(indices: list[int], limit: int, batch: bool = True) -> str:
    shown = ", ".join(f"q[{i}]" for i in indices[:20]) if batch else "q"
    return (f"{shown}: a sentence longer than the model's {limit} tokens with no clause "
            "punctuation was translated in windows, not as a whole")  # fmt: skip


def add_translation_routes(app: FastAPI, served: ServedModel, settings: ServerSettings,
                            worker: BatchingWorker) -> None:  # fmt: skip
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
                      attention: bool = False) -> list[TranslatedSentence]:  # fmt: skip
        request.state.sentences = getattr(request.state, "sentences", 0) + sum(map(bool, encoded))
        if not any(encoded):
            return [TranslatedSentence([]) for _ in encoded]
        job = Job(key=("translate", beam_size, n_best, attention), size=sum(map(bool, encoded)),
                  cost=sum(map(len, encoded)) * beam_size,
                  payload=TranslationWork(encoded, attention))  # fmt: skip
        return await wait_for(request, submit(worker, job))

    async def translate_texts(request: Request, texts: list[str], text_format: str, split: bool,
                              beam_size: int, n_best: int) -> list[TextResult]:  # fmt: skip
        """Texts in a format: split into sentences, each distinct one decoded once (pieces
        for the over-long), markup placed by alignment (in the worker thread), rebuilt."""
        translator = _translator()

        def prepare() -> tuple[TextBatch, list]:
            try:
                documents = [parse(valid_text(text), text_format, "q") for text in texts]
            except DataError as error:
                raise ApiError(400, f"Invalid request: {error}", "q") from None
            batch = TextBatch(documents, split)
            return batch, translator.plan(batch.sentences)

        # Parsing, splitting and rebuilding a large file take a second: off the event loop.
        batch, plans = await asyncio.to_thread(prepare)
        encoded = [piece.ids for plan in plans for piece in plan]
        found = [s.hypotheses for s in await _decode(request, encoded, beam_size, n_best)]
        if any(batch.aligned):
            job = Job(key=("finish",), size=len(batch.sentences), cost=1,
                      payload=(batch.sentences, plans, found, n_best, batch.aligned))  # fmt: skip
            finished = await wait_for(request, submit(worker, job))
        else:
            finished = await asyncio.to_thread(translator.finish, batch.sentences, plans, found,
                                               n_best)  # fmt: skip
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
        n_best = checked.alternatives + 1
        beam = max(settings.beam_size, n_best)
        texts = checked.texts
        if checked.format == "text":  # line endings as LibreTranslate reads them
            texts = [text.replace("\r\n", "\n").replace("\r", "\n") for text in texts]
        found = await translate_texts(request, texts, checked.format, True, beam, n_best)
        texts = [result.text for result in found]
        alternatives = [result.alternatives for result in found]
        answer: dict[str, Any] = {"translatedText": texts if checked.batch else texts[0]}
        if checked.alternatives:
            answer["alternatives"] = alternatives if checked.batch else alternatives[0]
        if checked.detect:
            detected = [detected_language(text) for text in checked.texts]
            answer["detectedLanguage"] = detected if checked.batch else detected[0]
        windowed = [i for i, result in enumerate(found) if result.windowed]
        if windowed:  # never silent: what could not be translated whole is said
            limit = _translator().engine.source_limit()
            answer["warnings"] = [not_whole_warning(windowed, limit, checked.batch)]
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
        if body.return_attention:  # attention is drawn over one sentence: each text whole
            lines = [" ".join(valid_text(text).split()) for text in texts]
            sentences = await translate(request, lines, beam, body.n_best, True)
            results = [TextResult(served.text(s.hypotheses[0]) if s.hypotheses else "",
                                  [served.text(h) for h in s.hypotheses[1:]], s.hypotheses,
                                  False) for s in sentences]  # fmt: skip
        else:
            results = await translate_texts(request, texts, body.format, body.split, beam,
                                            body.n_best)  # fmt: skip
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
            out.append(item)
        answer = {"model": served.name, "beam_size": beam, "translations": out}
        return {**answer, "warnings": warnings} if warnings else answer


def _results(batch: TextBatch, finished: list[SentenceTranslation],
             n_best: int) -> list[TextResult]:  # fmt: skip
    """Each text's best translation, its n-best hypotheses (the best combinations of its
    sentences' hypotheses, ``TextBatch.n_best``) and their texts as alternatives."""
    results = []
    for index, text in enumerate(batch.rebuild(finished)):
        ids = [i for segment in batch.segment_sentences(index) for i in segment]
        hypotheses = batch.n_best(index, finished, n_best) if ids else []
        results.append(TextResult(text, [h.text for h in hypotheses[1:]], hypotheses,
                                  any(finished[i].windowed for i in ids)))  # fmt: skip
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
