"""Texts translated through the worker: ``TextTranslator.translate_texts`` splits texts in a
format into sentences, has the worker decode their pieces and rebuilds each text with its
markup. LibreTranslate's, our own, DeepL's and the file routes all translate through it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from fastapi import Request

from seq2seq.decoding.search import Hypothesis
from seq2seq.errors import DataError
from seq2seq.formats import parse
from seq2seq.inference.confidence import UNCALIBRATED
from seq2seq.inference.documents import SentenceTranslation, TextBatch
from seq2seq.inference.glossary import Term, piece_texts
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.pieces import cut_source
from seq2seq.inference.translator import Translator
from seq2seq.serve.handling import submit, wait_for
from seq2seq.serve.protocol import ApiError, valid_text
from seq2seq.serve.served_model import ServedModel, TranslatedSentence, TranslationWork
from seq2seq.serve.worker import BatchingWorker, Job


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
    # In [0, 1], to 4 decimals as the scores are (seq2seq.inference.confidence); None: no text.
    confidence: float | None = None
    below_min_confidence: bool = False  # the text is its source (``keep_below``)


@dataclass
class _Prepared:
    """Texts made ready to decode: their sentences, each sentence's pieces (its plan), the
    glossary terms placed in the pieces, each piece's source ids (the terms annotated for a
    model trained with them) and the engine's constraints for the terms."""

    batch: TextBatch
    plans: list
    terms: list
    encoded: list[list[int]]
    constraints: list | None


class TextTranslator:
    """The served model's translator, reached through the worker that batches the requests."""

    def __init__(self, served: ServedModel, worker: BatchingWorker) -> None:
        self.served = served
        self.worker = worker

    @property
    def translator(self) -> Translator:
        """The translator; a language model serves no translation routes (a 400 says so)."""
        if self.served.translator is None:
            raise ApiError(
                400,
                f"{self.served.name} is a language model, not a translator: "
                "use POST /v1/completions",
            )
        return self.served.translator

    def source_limit(self) -> int:
        """The longest source, in tokens, the model translates whole."""
        return self.translator.engine.source_limit()

    async def translate_lines(
        self,
        request: Request,
        lines: list[str],
        beam_size: int,
        n_best: int,
        attention: bool = False,
        truecase: bool = True,
    ) -> list[TranslatedSentence]:
        """Each line decoded whole as one sentence (attention maps); ``truecase``: as
        ``TranslateOptions.truecase``."""
        translator = self.translator.with_truecase(truecase)
        limit = translator.engine.source_limit()
        # attention is drawn for the model's window (a Marian source keeps its eos)
        encoded = [
            cut_source(translator.encode_sentence(line), limit, translator.tokenizer)
            for line in lines
        ]
        return await self._decode(request, encoded, beam_size, n_best, attention)

    async def translate_texts(
        self, request: Request, texts: list, options: TranslateOptions
    ) -> list[TextResult]:
        """Texts in ``options.format`` (or documents parsed already: a zipped file's parts):
        split into sentences (``options.split``), each distinct one decoded once (pieces for the
        over-long) at ``options.beam_size`` with ``options.n_best`` hypotheses, markup placed
        by alignment (in the worker thread), rebuilt; ``options.glossary``: terms forced where
        their English side occurs. The batch size is the worker's (``--max-batch-tokens``),
        not ``options.max_tokens``."""
        translator = self.translator
        n_best = options.n_best
        # Parsing, splitting and rebuilding a large file take a second: off the event loop.
        prepared = await asyncio.to_thread(self._prepare, texts, options)
        decoded = await self._decode(
            request, prepared.encoded, options.beam_size, n_best, constraints=prepared.constraints
        )
        found = [sentence.hypotheses for sentence in decoded]
        if any(prepared.batch.aligned):
            finished = await self._finish_in_worker(request, prepared, found, n_best)
        else:
            finished = await asyncio.to_thread(
                translator.finish,
                prepared.batch.sentences,
                prepared.plans,
                found,
                n_best,
                None,
                prepared.terms,
            )
        calibration = translator.calibration
        return await asyncio.to_thread(_results, prepared.batch, finished, n_best, calibration)

    def _prepare(self, texts: list[str], options: TranslateOptions) -> _Prepared:
        translator = self.translator.with_truecase(options.truecase)
        try:
            documents = [
                text if isinstance(text, list) else parse(valid_text(text), options.format, "q")
                for text in texts
            ]  # a zipped file's parts come parsed (seq2seq.serve.files)
        except DataError as error:
            raise ApiError(400, f"Invalid request: {error}", "q") from None
        batch = translator.text_batch(documents, options)  # verbatim spans marked literal
        plans = translator.plan(batch.sentences)
        terms = translator.piece_terms(batch.sentences, plans, options.searched_terms[0])
        encoded = translator.encode_pieces(batch.sentences, plans, terms)
        try:
            constraints = translator.constraints(terms, piece_texts(batch.sentences, plans))
            return _Prepared(batch, plans, terms, encoded, constraints)
        except ValueError as error:  # a CTranslate2 engine
            raise ApiError(400, f"Invalid request: {error}", "glossary") from None

    async def _finish_in_worker(
        self, request: Request, prepared: _Prepared, found: list, n_best: int
    ) -> list[SentenceTranslation]:
        """Markup placed by alignment, which needs the model: in the worker thread."""
        job = Job(
            key=("finish",),
            size=len(prepared.batch.sentences),
            cost=1,
            payload=(
                prepared.batch.sentences,
                prepared.plans,
                found,
                n_best,
                prepared.batch.aligned,
                prepared.terms,
            ),
        )
        return await wait_for(request, submit(self.worker, job))

    async def _decode(
        self,
        request: Request,
        encoded: list[list[int]],
        beam_size: int,
        n_best: int,
        attention: bool = False,
        constraints: list | None = None,
    ) -> list[TranslatedSentence]:
        sentences = sum(map(bool, encoded))
        request.state.sentences = getattr(request.state, "sentences", 0) + sentences
        if not any(encoded):
            return [TranslatedSentence([]) for _ in encoded]
        # Constrained requests decode in whole batches of their own (never the continuous one).
        kind = "translate" if constraints is None else "constrained"
        job = Job(
            key=(kind, beam_size, n_best, attention),
            size=sentences,
            cost=sum(map(len, encoded)) * beam_size,
            payload=TranslationWork(encoded, attention, constraints),
        )
        return await wait_for(request, submit(self.worker, job))


def keep_below(texts: list[str], results: list[TextResult], minimum: float | None) -> None:
    """Where a text's confidence is below ``minimum``, its source in place of its translation
    (``below_min_confidence`` says so; alternatives dropped: none is trusted either)."""
    if minimum is None:
        return
    for text, result in zip(texts, results, strict=True):
        if result.confidence is not None and result.confidence < minimum:
            result.text, result.alternatives, result.below_min_confidence = text, [], True


def min_confidence(value: object, name: str = "min_confidence") -> float | None:
    """A request's ``min_confidence``: None, or a number in [0, 1] (else a 400 naming it)."""
    if value is None or value == "":
        return None
    try:
        number = float(value)  # a form or the query string gives a string
    except (TypeError, ValueError):
        number = float("nan")
    if not 0.0 <= number <= 1.0:
        raise ApiError(400, f"Invalid request: {name} must be a number in [0, 1]", name)
    return number


def _results(
    batch: TextBatch, finished: list[SentenceTranslation], n_best: int, calibration=None
) -> list[TextResult]:
    """Each text's best translation, its n-best hypotheses (the best combinations of its
    sentences' hypotheses, ``TextBatch.n_best``), their texts as alternatives, and its
    confidence (``calibration`` of its sentences' signals)."""
    results = []
    confidences = batch.confidences(finished, calibration or UNCALIBRATED)
    for index, text in enumerate(batch.rebuild(finished)):
        ids = [i for segment in batch.segment_sentences(index) for i in segment]
        hypotheses = batch.n_best(index, finished, n_best) if ids else []
        missing = list(dict.fromkeys(t for i in ids for t in finished[i].missing))
        results.append(
            TextResult(
                text,
                [h.text for h in hypotheses[1:]],
                hypotheses,
                any(finished[i].windowed for i in ids),
                missing,
                None if confidences[index] is None else round(confidences[index], 4),
            )
        )
    return results
