"""The translation routes: LibreTranslate's ``/translate``, ``/languages`` and ``/detect``, and
our ``/v1/translate`` (n-best lists, scores, attention). The handlers are the methods of
``TranslationRoutes``; ``text_translation`` does the translating they share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from seq2seq.decoding.search import Hypothesis
from seq2seq.errors import DataError
from seq2seq.formats.chinese_script import convert, target_tag
from seq2seq.inference.glossary import Glossary
from seq2seq.inference.options import TranslateOptions
from seq2seq.serve.files import TranslateTexts, add_file_routes
from seq2seq.serve.handling import ServerSettings, authorize
from seq2seq.serve.protocol import (
    MAX_BEAM,
    ApiError,
    TranslateArgs,
    detect_languages,
    detected_language,
    languages,
    parse_body,
    translate_args,
    valid_text,
)
from seq2seq.serve.served_model import ServedModel, TranslatedSentence
from seq2seq.serve.text_translation import (
    TextResult,
    TextTranslator,
    keep_below,
    min_confidence,
)
from seq2seq.serve.worker import BatchingWorker


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
    truecase: bool = True  # False: read as written (a server run with --no-truecase always is)
    # False: nothing kept as written for this request (with --no-verbatim nothing is anyway);
    # return_attention shows the model's own output, with no span put back.
    verbatim: bool = True
    target: str = "zh-Hans"  # or zh-Hant, zh-TW, zh-HK (seq2seq.formats.chinese_script)
    # Below it a text comes back as its source, untranslated (seq2seq.inference.confidence).
    min_confidence: float | None = Field(None, ge=0.0, le=1.0)
    api_key: str | None = None


def not_whole_warning(indices: list[int], limit: int, batch: bool = True) -> str:
    shown = ", ".join(f"q[{i}]" for i in indices[:20]) if batch else "q"
    return (
        f"{shown}: a sentence longer than the model's {limit} tokens with no clause "
        "punctuation was translated in windows, not as a whole"
    )


def missing_terms_warning(
    results: list[TextResult], batch: bool = True, annotation_alone: bool = False
) -> str | None:
    """Never silent: the texts whose translation lacks a glossary term, and the terms
    (``annotation_alone``: no constrained search ran, the model did not copy them)."""
    lacking = [(i, r.missing) for i, r in enumerate(results) if r.missing]
    if not lacking:
        return None
    shown = ", ".join(f"q[{i}]" for i, _ in lacking[:20]) if batch else "q"
    terms = ", ".join(dict.fromkeys(t.source for _, missing in lacking for t in missing))
    why = (
        "not written by the model from the source annotation (no constrained search)"
        if annotation_alone
        else "not placed within the length limit"
    )
    return f"{shown}: glossary term(s) {why}: {terms}"


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
    raise ApiError(
        400,
        f"Invalid request: {field_name} must be an object of English: Chinese terms or TSV lines",
        field_name,
    )


def add_translation_routes(
    app: FastAPI, served: ServedModel, settings: ServerSettings, worker: BatchingWorker
) -> TranslateTexts:
    """The routes; returns ``translate_texts``, which DeepL's ``/v2/translate`` shares."""
    texts = TextTranslator(served, worker)
    add_file_routes(app, settings, texts.translate_texts, served.translates)
    routes = TranslationRoutes(served, settings, texts)
    # GET /translate and POST /languages are LibreTranslate's too, left out of the schema.
    app.add_api_route(
        "/translate", routes.libre_translate, methods=["GET"], include_in_schema=False
    )
    app.add_api_route("/translate", routes.libre_translate, methods=["POST"])
    app.add_api_route(
        "/languages", routes.libre_languages, methods=["POST"], include_in_schema=False
    )
    app.add_api_route("/languages", routes.libre_languages, methods=["GET"])
    app.add_api_route("/detect", routes.libre_detect, methods=["POST"])
    app.add_api_route("/v1/translate", routes.native_translate, methods=["POST"])
    return texts.translate_texts


@dataclass(eq=False)  # handlers: compared and hashed as themselves
class TranslationRoutes:
    """The handlers, with what they share: the served model, the settings and the
    translator of texts."""

    served: ServedModel
    settings: ServerSettings
    texts: TextTranslator

    async def libre_translate(self, request: Request) -> JSONResponse:
        """LibreTranslate's /translate: q (string or array), source, target, format,
        alternatives, api_key; from JSON, a form or the query string."""
        args = await _libre_arguments(request)
        authorize(self.settings, args.get("api_key"), request)
        checked = translate_args(args, self.settings.limits)
        glossary = request_glossary(args.get("glossary"))
        n_best = checked.alternatives + 1
        beam = max(self.settings.beam_size, n_best)
        texts = checked.texts
        if checked.format == "text":  # line endings as LibreTranslate reads them
            texts = [text.replace("\r\n", "\n").replace("\r", "\n") for text in texts]
        options = TranslateOptions(
            beam_size=beam,
            n_best=n_best,
            format=checked.format,
            glossary=glossary,
            target=checked.target,
        )
        minimum = min_confidence(args.get("min_confidence"))  # ours: below it, the source
        found = await self.texts.translate_texts(request, texts, options)
        keep_below(texts, found, minimum)
        return JSONResponse(self._libre_answer(checked, found, glossary, minimum))

    def _libre_answer(
        self,
        checked: TranslateArgs,
        found: list[TextResult],
        glossary: Glossary | None,
        minimum: float | None = None,
    ) -> dict[str, Any]:
        def each(values: list) -> Any:  # q an array: arrays; q a string: single values
            return values if checked.batch else values[0]

        answer: dict[str, Any] = {"translatedText": each([result.text for result in found])}
        answer["confidence"] = each([result.confidence for result in found])
        if minimum is not None:
            answer["belowMinConfidence"] = each([r.below_min_confidence for r in found])
        if checked.alternatives:
            answer["alternatives"] = each([result.alternatives for result in found])
        if checked.detect:
            answer["detectedLanguage"] = each([detected_language(t) for t in checked.texts])
        if glossary is not None:
            answer["glossaryTermsNotMet"] = each(
                [[t.source for t in result.missing] for result in found]
            )
        if warnings := self._libre_warnings(found, glossary, checked.batch):
            answer["warnings"] = warnings
        return answer

    def _libre_warnings(
        self, found: list[TextResult], glossary: Glossary | None, batch: bool
    ) -> list[str]:
        """Never silent: what could not be translated whole, and glossary terms not placed."""
        warnings = []
        windowed = [i for i, result in enumerate(found) if result.windowed]
        if windowed:
            warnings.append(not_whole_warning(windowed, self.texts.source_limit(), batch))
        alone = self.served.translator.annotation_alone
        if glossary is not None and (lacking := missing_terms_warning(found, batch, alone)):
            warnings.append(lacking)
        return warnings

    async def libre_languages(self) -> list[dict[str, Any]]:
        """What the model translates: English to Chinese (none for a language model)."""
        return languages() if self.served.translates else []

    async def libre_detect(self, request: Request) -> list[dict[str, Any]]:
        """LibreTranslate's /detect: the languages of q by script, most confident first
        (``protocol.detect_languages``); an empty q is a 400, as there."""
        args = await _libre_arguments(request)
        authorize(self.settings, args.get("api_key"), request)
        if not args.get("q") or not isinstance(args["q"], str):
            raise ApiError(400, "Invalid request: missing q parameter", "q")
        return detect_languages(args["q"])

    async def native_translate(self, body: NativeTranslateRequest, request: Request) -> dict:
        """Each text as one segment: n-best hypotheses with scores, and cross-attention."""
        authorize(self.settings, body.api_key, request)
        texts = body.text if isinstance(body.text, list) else [body.text]
        self.settings.limits.check(texts)
        if body.return_attention and not self.served.attention:
            raise ApiError(400, "return_attention needs a torch engine (not CTranslate2)")
        beam = max(body.beam_size or self.settings.beam_size, body.n_best)
        target = _native_target(body.target)
        warnings = _raised_beam_warnings(body, beam)
        glossary = _native_glossary(body)
        if body.return_attention:  # attention is drawn over one sentence: each text whole
            results, sentences = await self._translate_whole(request, texts, beam, body, target)
        else:
            options = TranslateOptions(
                beam_size=beam,
                n_best=body.n_best,
                format=body.format,
                split=body.split,
                glossary=glossary,
                truecase=body.truecase,
                verbatim=body.verbatim,
                target=target,
            )
            results = await self.texts.translate_texts(request, texts, options)
            keep_below(texts, results, body.min_confidence)
            sentences = [TranslatedSentence(r.hypotheses) for r in results]
        out = [
            _native_item(body, result, sentence, glossary is not None)
            for result, sentence in zip(results, sentences, strict=True)
        ]
        alone = self.served.translator.annotation_alone
        if lacking := missing_terms_warning(results, annotation_alone=alone):
            warnings.append(lacking)
        answer = {"model": self.served.name, "beam_size": beam, "translations": out}
        return {**answer, "warnings": warnings} if warnings else answer

    async def _translate_whole(
        self,
        request: Request,
        texts: list[str],
        beam: int,
        body: NativeTranslateRequest,
        target: str,
    ) -> tuple[list[TextResult], list[TranslatedSentence]]:
        """Each text decoded as one sentence, with its attention (over the model's own
        tokens; the texts in ``target``'s script)."""
        lines = [" ".join(valid_text(text).split()) for text in texts]
        sentences = await self.texts.translate_lines(
            request, lines, beam, body.n_best, True, body.truecase
        )

        def text(hypothesis: Hypothesis) -> str:
            return convert(self.served.text(hypothesis), target)

        results = [
            TextResult(
                text(s.hypotheses[0]) if s.hypotheses else "",
                [text(h) for h in s.hypotheses[1:]],
                s.hypotheses,
                False,
            )
            for s in sentences
        ]
        return results, sentences


def _native_target(value: str) -> str:
    """The request's ``target``, read as ``TranslateOptions`` reads it; an unknown one is a
    400 naming the known ones."""
    try:
        return target_tag(value)
    except ValueError as error:
        raise ApiError(400, f"Invalid request: {error}", "target") from None


def _raised_beam_warnings(body: NativeTranslateRequest, beam: int) -> list[str]:
    """Never silent: the answer differs from the ask when n_best raised the beam."""
    asked = body.beam_size
    if asked is None or beam <= asked:
        return []
    return [
        f"beam_size {asked} raised to {beam} to return n_best {body.n_best} "
        "(a beam finds at most beam_size hypotheses)"
    ]


def _native_glossary(body: NativeTranslateRequest) -> Glossary | None:
    """The request's glossary, once the options that return_attention excludes are checked
    (attention is drawn over plain text, decoded without constraints)."""
    if body.return_attention and body.format != "text":
        raise ApiError(
            400,
            "Invalid request: return_attention takes plain text (format: text)",
            "return_attention",
        )
    glossary = request_glossary(body.glossary)
    if body.return_attention and glossary is not None:
        raise ApiError(400, "Invalid request: return_attention takes no glossary", "glossary")
    return glossary


def _native_item(
    body: NativeTranslateRequest, result: TextResult, sentence: TranslatedSentence, glossary: bool
) -> dict[str, Any]:
    """One text's translation, with what the request asked for beside it."""
    item: dict[str, Any] = {"text": result.text, "confidence": result.confidence}
    if result.below_min_confidence:
        item["below_min_confidence"] = True
    if body.return_scores or body.n_best > 1:
        ranked = [result.text, *result.alternatives]
        item["hypotheses"] = [
            {
                "text": ranked[min(k, len(ranked) - 1)],
                "score": round(h.score, 4),
                "log_prob": round(h.log_prob, 4),
                "tokens": len(h.tokens),
            }
            for k, h in enumerate(result.hypotheses)
        ]
    if body.return_attention:
        item["attention"] = sentence.attention
    if result.windowed:
        item["windowed"] = True
    if glossary:
        item["glossary_terms_not_met"] = [t.source for t in result.missing]
    return item


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
