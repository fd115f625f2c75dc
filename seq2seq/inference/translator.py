"""Translation from a checkpoint: lines in, one output line per input line, in order.

``Translator`` owns what every runtime shares: normalising and encoding lines, cutting
over-long sources, batching by tokens (longest first, so padding stays small), splitting a
batch that runs out of memory, and putting outputs back in input order. The decoding itself
comes from an engine: ``TorchEngine`` (our model and searches), or ``CTranslate2Engine`` in
``seq2seq.inference.ctranslate2_engine``; a server batching requests is one more user of the
same seam (``seq2seq.inference.engines``).

This module holds the entry points; the steps they take come from ``Translator``'s bases, each
in the module of the data it works on: ``SourceEncoding`` (``source_encoding.py``: ``plan``,
``encode_pieces``, ``encode``, ``encode_sentence``), ``GlossaryTerms`` (``glossary_terms.py``:
``piece_terms``, ``constraints``, ``annotation_alone``) and ``BatchDecoding``
(``batch_decoding.py``: ``decode_encoded``, ``finish``, ``text``). How a sentence is cut into
pieces and sources into token batches lives in ``pieces.py``, how the pieces' hypotheses become
sentence translations (texts, alignment, missing terms) in ``finishing.py``, and what a
glossary adds (each piece's terms, the beam they are searched with) in ``glossary.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from seq2seq.data.terms import term_tag_ids
from seq2seq.data.truecase import Truecaser
from seq2seq.decoding.search import Hypothesis, SearchConfig
from seq2seq.decoding.shortlist import Shortlist
from seq2seq.errors import CheckpointError
from seq2seq.formats import Document, parse, parse_text
from seq2seq.formats.epub import with_lang as book_with_lang
from seq2seq.formats.html import with_lang as page_with_lang
from seq2seq.formats.office_language import with_lang as runs_with_lang
from seq2seq.formats.verbatim import Verbatim
from seq2seq.inference.batch_decoding import BatchDecoding
from seq2seq.inference.checkpoint import load_model
from seq2seq.inference.confidence import UNCALIBRATED, Calibration, Translation
from seq2seq.inference.cpu import check_quantize, prepare_for_inference
from seq2seq.inference.documents import SentenceTranslation, TextBatch, windowed_lines
from seq2seq.inference.engines import Engine, TorchEngine, read_shortlist, token_rules

# Re-exported: scripts/benchmarks/terminology.py reads the beam of a constrained search here.
from seq2seq.inference.glossary import constrained_beam as constrained_beam
from seq2seq.inference.glossary import piece_texts, warn_missing_terms
from seq2seq.inference.glossary_terms import GlossaryTerms
from seq2seq.inference.options import (
    NO_PROGRESS,
    Progress,
    TranslateOptions,
    old_arguments,
)
from seq2seq.inference.pieces import line_windows
from seq2seq.inference.source_encoding import SourceEncoding
from seq2seq.textio import one_line, warn_lines

DEFAULT_WINDOW = 1000  # lines decoded together when streaming (translate_stream)
# Formats whose documents say their language: (document, target) -> the document saying it.
LANGUAGE_TAGGED = {
    "html": page_with_lang,
    "docx": runs_with_lang,
    "pptx": runs_with_lang,
    "epub": book_with_lang,
}


# Said by `translate` and `serve` when --glossary-annotation-only cannot apply.
ANNOTATION_ONLY_IGNORED = (
    "--glossary-annotation-only: this model was not trained with term annotation, so its "
    "glossaries keep the constrained search"
)


class Translator(SourceEncoding, GlossaryTerms, BatchDecoding):
    """A decoding engine plus its tokenizer: English lines in, Chinese lines out.

    Examples:
        >>> translator = Translator.from_checkpoint("runs/demo/checkpoints/last.ckpt")
        >>> translator.translate(["I love you."], TranslateOptions(beam_size=5))
        ['我爱你。']

    Entry points: ``translate`` (lines or documents), ``translate_stream`` (a stream of lines,
    a window at a time) and ``translate_n_best`` (n-best lists), each taking one
    ``TranslateOptions``; ``translate_documents`` and ``translate_sentences`` are the floors
    below them, and ``decode_encoded`` the server's (sources already encoded). The steps
    (``plan``, ``encode_pieces``, ``piece_terms``, ``constraints``, ``decode_encoded``,
    ``finish``, ...) come from its bases ``SourceEncoding``, ``GlossaryTerms`` and
    ``BatchDecoding``.
    """

    def __init__(self, engine: Engine, tokenizer, truecaser: Truecaser | None = None) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        # SHOUTED and Title Cased lines are read in sentence case (seq2seq.data.truecase)
        # with the training English's word forms; a checkpoint without them reads as written.
        self.truecaser = truecaser or Truecaser()
        # A model trained with term annotation (seq2seq.data.terms) reads a glossary's terms
        # in its source; constrained beam search stays on as the guarantee unless this is
        # False (annotation alone: faster, and what an engine without that search gets).
        self.annotates_terms = term_tag_ids(tokenizer) is not None
        self.constrain_terms = True
        # What TranslateOptions(verbatim=True) keeps as written (a server's --verbatim file).
        self.verbatim: Verbatim | None = Verbatim()
        self._split_batches = 0  # batches split after running out of memory, per call
        # Signals -> confidence (seq2seq calibrate's fit to chrF, or the uncalibrated ranking).
        self.calibration = UNCALIBRATED

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        device: str = "cpu",
        quantize: str | None = None,
        shortlist: str | Path | None = None,
    ) -> Translator:
        """Build everything from a ``.ckpt`` written by ``seq2seq fit``: an encoder-decoder
        model, or a decoder-only one trained on joined pairs (``configs/lm_translate.yaml``).
        On the CPU in float32 its weights are packed for inference, or with
        ``quantize="int8"`` quantized to int8 (``seq2seq.inference.cpu.prepare_for_inference``).
        ``shortlist``: a ``seq2seq shortlist`` file; each sentence then writes only its
        candidate pieces (``seq2seq.decoding.shortlist``)."""
        check_quantize(quantize, device)
        loaded = load_model(path, device)
        if loaded.is_language_model:
            raise CheckpointError(
                f"{path}: a language model, not a translation model; use 'seq2seq generate'"
            )
        config, rules = loaded.model.config, token_rules(loaded.tokenizer)
        listed = None if shortlist is None else read_shortlist(shortlist, loaded.tokenizer, config)
        model = prepare_for_inference(loaded.model, quantize)
        engine = TorchEngine(model, loaded.search, rules, listed)
        translator = cls(engine, loaded.tokenizer, Truecaser(loaded.truecase))
        translator.calibration = Calibration.from_dict(loaded.confidence)
        return translator

    @classmethod
    def from_ctranslate2(
        cls,
        directory: str | Path,
        device: str = "cpu",
        quantize: str | None = None,
        threads: int = 1,
    ) -> Translator:
        """A translator over a ``seq2seq export --format ctranslate2`` directory;
        ``quantize="int8"`` has CTranslate2 quantize a float32 export as it loads it;
        ``threads``: CTranslate2's (one is fastest for batches on a few cores; a server
        answering one sentence at a time gains from more)."""
        from seq2seq.inference.ctranslate2_engine import CTranslate2Engine

        check_quantize(quantize, device)
        engine = CTranslate2Engine(
            directory, device=device, compute_type=quantize or "default", threads=threads
        )
        return cls(engine, engine.tokenizer, Truecaser(engine.truecase))

    @property
    def search(self) -> SearchConfig:
        return self.engine.search

    def with_search(self, **overrides: Any) -> Translator:
        """A translator sharing this engine, with some search settings changed (None = keep)."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        translator = Translator(self.engine.with_search(**changes), self.tokenizer, self.truecaser)
        translator.constrain_terms, translator.verbatim = self.constrain_terms, self.verbatim
        return translator

    def with_shortlist(self, shortlist: Shortlist | None) -> Translator:
        """A translator sharing this one's model, decoding with ``shortlist`` (None: the whole
        vocabulary). Our engine only: a CTranslate2 export carries its own (``vmap.txt``)."""
        if not isinstance(self.engine, TorchEngine):
            raise ValueError("a shortlist file is for our engine; export it for CTranslate2")
        translator = copy.copy(self)
        translator.engine = copy.copy(self.engine)
        translator.engine.shortlist = shortlist
        return translator

    def with_truecase(self, truecase: bool) -> Translator:
        """This translator, or (False) one sharing its engine that reads every line exactly as
        written (``TranslateOptions.truecase``; ``--no-truecase``)."""
        if truecase:
            return self
        translator = copy.copy(self)
        translator.truecaser = Truecaser()  # no learnt forms: nothing rewritten
        return translator

    @old_arguments(
        "beam_size", "max_tokens", "on_batch", "split", "on_total", "first_line", "glossary"
    )
    def translate(
        self,
        texts: Sequence[str],
        options: TranslateOptions | None = None,
        *,
        progress: Progress = NO_PROGRESS,
        first_line: int = 1,
        source: str = "<input>",
    ) -> list[str]:
        """Translate ``texts``: exactly one output per input, in order.

        Args:
            texts: in ``options.format``. Plain text ("text", the default): each text a line
                (a paragraph or a sentence), its translation one line; a text holding line
                breaks keeps them, line for line; an empty line gives an empty output. HTML,
                Markdown, SRT: whole documents, their markup kept.
            options: beam, batch size, sentence splitting, glossary, format
                (``TranslateOptions``; its defaults when None).
            progress: told the number of distinct sentences, then each batch's count.
            first_line: the number of ``texts[0]`` in its file, for warnings naming lines.
            source: the file the texts come from, for errors naming it.

        Raises:
            DataError: HTML or SRT that does not parse (naming ``source`` and the line).

        Examples:
            >>> translator.translate(["I love you."], TranslateOptions(beam_size=5))
            ['我爱你。']
        """
        scored = self.translate_with_confidence(
            texts, options, progress=progress, first_line=first_line, source=source
        )
        return [translation.text for translation in scored]  # the confidence costs ~0.1%

    @old_arguments(
        "beam_size",
        "max_tokens",
        "split",
        "window",
        "on_window",
        "on_batch",
        "on_total",
        "glossary",
    )
    def translate_stream(
        self,
        lines: Iterable[str],
        options: TranslateOptions | None = None,
        *,
        window: int = DEFAULT_WINDOW,
        on_window: Callable[[int], None] | None = None,
        progress: Progress = NO_PROGRESS,
    ) -> Iterator[list[str]]:
        """``translate`` of a stream of plain lines, ``window`` lines at a time (Marian's
        maxi-batch): each window's outputs, in input order, as soon as they are done, so a
        long file shows output early and an interrupted run keeps what was finished.

        Sorting by length and token batching happen within a window; with windows of 1,000
        lines the demo test set decodes as fast as in one pass (docs/benchmarks.md, "Streamed
        translation"; ``seq2seq translate`` decodes the same windows, with ``--n-best`` as an
        option). ``on_window`` is called with each window's number of lines before it is
        decoded; ``progress`` as in ``translate``, per window.
        """
        options = options or TranslateOptions()
        done = 0
        for chunk in line_windows(lines, window):
            if on_window is not None:
                on_window(len(chunk))
            yield self.translate(chunk, options, progress=progress, first_line=done + 1)
            done += len(chunk)

    @old_arguments(
        "n_best",
        "beam_size",
        "max_tokens",
        "split",
        "on_batch",
        "on_total",
        "glossary",
        "first_line",
    )
    def translate_n_best(
        self,
        lines: Sequence[str],
        options: TranslateOptions | None = None,
        *,
        progress: Progress = NO_PROGRESS,
        first_line: int = 1,
    ) -> list[list[Hypothesis]]:
        """The ``options.n_best`` best translations of each plain line, best first, each a
        ``Hypothesis`` with its ``text`` (searched with ``options.search_beam``). A line of
        several sentences has each sentence searched apart; its candidates are the ``n_best``
        combinations of their hypotheses with the highest summed score (``TextBatch.n_best``);
        with ``split=False`` the line is one sentence and these are its own hypotheses. An
        empty line has one empty hypothesis (score 0), so no line is left without an
        answer."""
        options = options or TranslateOptions()
        if options.format != "text":
            raise ValueError(f"n-best lists take plain text, not format {options.format!r}")
        documents = [parse_text(line.replace("\n", " ")) for line in lines]
        batch = self.text_batch(documents, options)
        found = self.translate_sentences(
            batch.sentences, replace(options, beam_size=options.search_beam), progress=progress
        )
        warn_missing_terms(batch, found, first_line)
        return [
            [replace(h, text=one_line(h.text)) for h in batch.n_best(i, found, options.n_best)]
            for i in range(len(lines))
        ]

    @old_arguments(
        "format",
        "beam_size",
        "max_tokens",
        "split",
        "source",
        "glossary",
        replacement="call translate(texts, TranslateOptions(format=...), source=...)",
    )
    def translate_text(
        self, texts: Sequence[str], options: TranslateOptions, source: str = "<input>"
    ) -> list[str]:
        """Deprecated (0.3): ``translate(texts, TranslateOptions(format=...))``."""
        return self.translate(texts, options, source=source)

    @old_arguments(
        "beam_size", "max_tokens", "split", "on_batch", "on_total", "first_line", "glossary"
    )
    def translate_documents(
        self,
        documents: list[Document],
        options: TranslateOptions | None = None,
        *,
        progress: Progress = NO_PROGRESS,
        first_line: int = 1,
    ) -> list[str]:
        """Parsed documents (``seq2seq.formats``) translated: every distinct sentence of all
        of them decoded in one token-batched pass, then each document rebuilt. A warning
        names document i as line ``first_line + i``, or a document read whole from a file by
        the line its paragraph starts on."""
        batch, found = self._translate_batch(documents, options, progress, first_line)
        return batch.rebuild(found)

    def translate_with_confidence(
        self,
        texts: Sequence[str],
        options: TranslateOptions | None = None,
        *,
        progress: Progress = NO_PROGRESS,
        first_line: int = 1,
        source: str = "<input>",
    ) -> list[Translation]:
        """``translate``, each output with its confidence in [0, 1] (``Translation``): its
        sentences' (``seq2seq.inference.confidence``; calibrated to chrF by ``seq2seq
        calibrate``, ``self.calibration.calibrated``), weighted by their source tokens; None
        for a text with nothing to translate."""
        options = options or TranslateOptions()
        documents = [parse(text, options.format, source) for text in texts]
        batch, found = self._translate_batch(documents, options, progress, first_line)
        outputs = batch.rebuild(found)
        if options.format == "text":  # each input line answered by one output line
            outputs = ["\n".join(one_line(line) for line in text.split("\n")) for text in outputs]
        confidences = batch.confidences(found, self.calibration)
        return [Translation(t, c) for t, c in zip(outputs, confidences, strict=True)]

    def _translate_batch(
        self,
        documents: list[Document],
        options: TranslateOptions | None,
        progress: Progress,
        first_line: int,
    ) -> tuple[TextBatch, list[SentenceTranslation]]:
        """The documents' distinct sentences translated, with the warnings that name lines."""
        options = options or TranslateOptions()
        batch = self.text_batch(documents, options)
        found = self.translate_sentences(
            batch.sentences, replace(options, n_best=1), aligned=batch.aligned, progress=progress
        )
        warn_missing_terms(batch, found, first_line)
        windowed = windowed_lines(batch, found, first_line)
        if windowed:
            limit = self.engine.source_limit()
            warn_lines(
                f"{len(windowed)} input(s) held a sentence longer than the model's "
                f"{limit} tokens with no clause punctuation to cut it at; it was "
                "translated in windows, not as a whole",
                windowed,
            )
        return batch, found

    def text_batch(self, documents: list[Document], options: TranslateOptions) -> TextBatch:
        """The documents' distinct sentences, their verbatim spans marked literal
        (``options.verbatim_rules``; acronyms in SHOUTED lines as this truecaser reads them),
        rebuilt in ``options.target``'s script (an HTML page's ``lang``, a Word or PowerPoint
        file's translated runs' language set to it: ``LANGUAGE_TAGGED``)."""
        truecaser = self.with_truecase(options.truecase).truecaser
        rules = options.verbatim_rules(self.verbatim)
        tagged = LANGUAGE_TAGGED.get(options.format)
        if tagged is not None:  # the document says the language it is now in
            documents = [tagged(document, options.target) for document in documents]
        written = options.searched_terms[1]
        return TextBatch(documents, options.split, rules, truecaser, options.target, written)

    @old_arguments(
        "beam_size", "max_tokens", "n_best", "aligned", "on_batch", "on_total", "glossary"
    )
    def translate_sentences(
        self,
        sentences: Sequence[str],
        options: TranslateOptions | None = None,
        *,
        aligned: Sequence[bool | tuple[str, ...]] | None = None,
        progress: Progress = NO_PROGRESS,
    ) -> list[SentenceTranslation]:
        """Each sentence translated whole (``options.split`` is not read: these are
        sentences), or, when longer than the model takes, in pieces (``plan``); its
        ``options.n_best`` hypotheses at ``options.beam_size``; ``aligned[i]``: also align
        sentence i's best translation to its words (``TextBatch.aligned``); ``options.glossary``:
        terms forced where their English side occurs (``piece_terms``). The texts are the
        model's own, in Simplified Chinese, whatever ``options.target``: they are written in
        its script as the documents are rebuilt (``TextBatch``)."""
        options = options or TranslateOptions()
        reader = self.with_truecase(options.truecase)
        plans = reader.plan(sentences)
        terms = self.piece_terms(sentences, plans, options.searched_terms[0])
        encoded = reader.encode_pieces(sentences, plans, terms)
        progress.set_total(sum(1 for ids in encoded if ids))
        constraints = self.constraints(terms, piece_texts(sentences, plans))
        found = self.decode_encoded(
            encoded,
            options.beam_size,
            options.max_tokens,
            options.n_best,
            progress.advance,
            constraints,
        )
        return self.finish(sentences, plans, found, options.n_best, aligned, terms)

    @old_arguments(
        "beam_size",
        "max_tokens",
        "n_best",
        "on_batch",
        replacement="call translate_n_best(lines, TranslateOptions(split=False, n_best=...))",
    )
    def translate_hypotheses(
        self,
        lines: Sequence[str],
        options: TranslateOptions,
        progress: Progress = NO_PROGRESS,
    ) -> list[list[Hypothesis]]:
        """Deprecated (0.3): ``translate_n_best(lines, TranslateOptions(split=False,
        n_best=...))`` (which answers an empty line with one empty hypothesis, not [])."""
        found = self.translate_sentences(
            [line.replace("\n", " ") for line in lines], options, progress=progress
        )
        return [
            [replace(h, text=text) for h, text in zip(s.hypotheses, s.texts, strict=True)]
            for s in found
        ]
