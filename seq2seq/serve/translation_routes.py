"""The translation routes: LibreTranslate's ``/translate``, ``/languages`` and ``/detect``, and
our ``/v1/translate`` (n-best lists, scores, attention)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from seq2seq.serve.batching import BatchingWorker, Job
from seq2seq.serve.handling import ServerSettings, authorize, submit, wait_for
from seq2seq.serve.model import ServedModel, TranslatedSentence, TranslationWork
from seq2seq.serve.protocol import (
    MAX_BEAM,
    ApiError,
    detected_language,
    languages,
    parse_body,
    split_lines,
    translate_args,
    valid_text,
)


class NativeTranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | list[str]
    beam_size: int | None = Field(None, ge=1, le=MAX_BEAM)
    n_best: int = Field(1, ge=1, le=MAX_BEAM)
    return_scores: bool = False
    return_attention: bool = False
    api_key: str | None = None


def add_translation_routes(app: FastAPI, served: ServedModel, settings: ServerSettings,
                            worker: BatchingWorker) -> None:  # fmt: skip
    async def translate(request: Request, lines: list[str], beam_size: int, n_best: int,
                        attention: bool = False) -> list[TranslatedSentence]:  # fmt: skip
        if served.translator is None:
            raise ApiError(400, f"{served.name} is a language model, not a translator: use "
                                "POST /v1/completions")  # fmt: skip
        nonempty = [i for i, line in enumerate(lines) if line.strip()]
        encoded: list[list[int]] = [[] for _ in lines]
        for i, ids in zip(nonempty, served.translator.encode([lines[i] for i in nonempty]),
                          strict=True):  # fmt: skip
            encoded[i] = ids
        request.state.sentences = len(nonempty)
        if not any(encoded):
            return [TranslatedSentence([]) for _ in lines]
        job = Job(key=("translate", beam_size, n_best, attention), size=len(nonempty),
                  cost=sum(map(len, encoded)) * beam_size,
                  payload=TranslationWork(encoded, attention))  # fmt: skip
        return await wait_for(request, submit(worker, job))

    @app.post("/translate")
    @app.get("/translate", include_in_schema=False)
    async def libre_translate(request: Request) -> JSONResponse:
        """LibreTranslate's /translate: q (string or array), source, target, format,
        alternatives, api_key; from JSON, a form or the query string."""
        args = await _libre_arguments(request)
        authorize(settings, args.get("api_key"), request)
        checked = translate_args(args, settings.limits)
        per_text = [split_lines(text) for text in checked.texts]
        n_best = checked.alternatives + 1
        beam = max(settings.beam_size, n_best)
        found = await translate(request, [line for lines in per_text for line in lines], beam,
                                n_best)  # fmt: skip
        texts, alternatives, start = [], [], 0
        for lines in per_text:
            sentences = found[start : start + len(lines)]
            start += len(lines)
            ranked = [[served.text(h) for h in s.hypotheses] or [""] for s in sentences]
            texts.append("\n".join(r[0] for r in ranked))
            alternatives.append(["\n".join(r[min(k, len(r) - 1)] for r in ranked)
                                 for k in range(1, 1 + checked.alternatives)
                                 if any(len(r) > k for r in ranked)])  # fmt: skip
        answer: dict[str, Any] = {"translatedText": texts if checked.batch else texts[0]}
        if checked.alternatives:
            answer["alternatives"] = alternatives if checked.batch else alternatives[0]
        if checked.detect:
            detected = [detected_language(text) for text in checked.texts]
            answer["detectedLanguage"] = detected if checked.batch else detected[0]
        return JSONResponse(answer)

    @app.get("/languages")
    @app.post("/languages", include_in_schema=False)
    async def libre_languages() -> list[dict[str, Any]]:
        """What the model translates: English to Chinese (none for a language model)."""
        return languages() if served.translates else []

    @app.post("/detect")
    async def libre_detect(request: Request) -> list[dict[str, Any]]:
        args = await _libre_arguments(request)
        authorize(settings, args.get("api_key"), request)
        if not isinstance(args.get("q"), str):
            raise ApiError(400, "Invalid request: missing q parameter", "q")
        return [detected_language(args["q"])]

    @app.post("/v1/translate")
    async def native_translate(body: NativeTranslateRequest, request: Request) -> dict:
        """Each text as one segment: n-best hypotheses with scores, and cross-attention."""
        authorize(settings, body.api_key, request)
        texts = body.text if isinstance(body.text, list) else [body.text]
        settings.limits.check(texts)
        if body.return_attention and not served.attention:
            raise ApiError(400, "return_attention needs a torch engine (not CTranslate2)")
        beam = max(body.beam_size or settings.beam_size, body.n_best)
        lines = [" ".join(valid_text(text).split()) for text in texts]
        found = await translate(request, lines, beam, body.n_best, body.return_attention)
        out = []
        for sentence in found:
            best = served.text(sentence.hypotheses[0]) if sentence.hypotheses else ""
            item: dict[str, Any] = {"text": best}
            if body.return_scores or body.n_best > 1:
                item["hypotheses"] = [
                    {"text": served.text(h), "score": round(h.score, 4),
                     "log_prob": round(h.log_prob, 4), "tokens": len(h.tokens)}
                    for h in sentence.hypotheses
                ]  # fmt: skip
            if body.return_attention:
                item["attention"] = sentence.attention
            out.append(item)
        return {"model": served.name, "beam_size": beam, "translations": out}


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
