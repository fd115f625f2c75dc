"""Translation from a checkpoint: lines in, one output line per input line, in order.

``Translator`` owns what every runtime shares: normalising and encoding lines, cutting
over-long sources, batching by tokens (longest first, so padding stays small), splitting a
batch that runs out of memory, and putting outputs back in input order. The decoding itself
comes from an engine: ``TorchEngine`` (our model and searches), or ``CTranslate2Engine`` in
``seq2seq.inference.ctranslate2_engine``; a server batching requests is one more user of the
same seam.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import torch

from seq2seq.data.clean import normalize_en
from seq2seq.data.sentences import clauses
from seq2seq.decoding.constrained import Constraints
from seq2seq.decoding.decode import translate_ids, translation_prompt
from seq2seq.decoding.search import Hypothesis, SearchConfig
from seq2seq.errors import CheckpointError
from seq2seq.formats import Document, parse, parse_text
from seq2seq.formats.inline import Alignment, monotonic_alignment
from seq2seq.inference.attention_maps import cross_attention_maps, self_attention_maps
from seq2seq.inference.checkpoint import load_model
from seq2seq.inference.cpu import check_quantize, prepare_for_inference
from seq2seq.inference.documents import (
    SentenceTranslation,
    TextBatch,
    combine_hypotheses,
    windowed_lines,
)
from seq2seq.inference.glossary import Glossary, Term, missing_terms, term_constraints
from seq2seq.model import Transformer
from seq2seq.textio import one_line, warn_lines

# The decoding batch budget every command, the server and the API default to: source tokens x
# beam size per batch (decoder rows, after finished sentences leave).
MAX_TOKENS = 4000
WORD_START = "\u2581"  # SentencePiece's mark of a piece that starts a word
DEFAULT_WINDOW = 1000  # lines decoded together when streaming (translate_stream)
# Sentences with glossary terms are searched with a beam of at least this: dynamic beam
# allocation shares the beam among constraint counts, and a beam of 1 can only paste a term.
MIN_CONSTRAINED_BEAM = 5
MAX_CONSTRAINED_BEAM = 12  # ... and of one slot per bank, up to this


class Engine(Protocol):
    """A runtime that decodes batches of source ids: what ``Translator`` needs."""

    search: SearchConfig
    device: str

    def hypotheses(
        self,
        sources: list[list[int]],
        beam_size: int,
        n_best: int = 1,
        constraints: Sequence[Constraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        """The ``n_best`` best outputs of each source (ids without bos/eos), best first;
        ``constraints``: what each output must hold (``seq2seq.decoding.constrained``)."""
        ...

    def source_limit(self) -> int:
        """Longest source (in tokens) the engine takes."""
        ...

    def batch_budget(self, max_tokens: int, beam_size: int) -> int:
        """Source tokens per batch for a ``max_tokens`` budget at this beam size."""
        ...

    def with_search(self, **changes: Any) -> Engine:
        """The same engine (sharing the model) with some search settings changed."""
        ...


class TorchEngine:
    """Our Transformer and our searches (``seq2seq.decoding.decode.translate_ids``)."""

    constrains = True  # has constrained beam search (glossaries)

    def __init__(self, model: Transformer, search: SearchConfig) -> None:
        self.model = model.eval()
        self.search = search

    @property
    def device(self) -> str:
        return str(self.model.embedding.weight.device)

    def hypotheses(
        self,
        sources: list[list[int]],
        beam_size: int,
        n_best: int = 1,
        constraints: Sequence[Constraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        return translate_ids(self.model, self._pad(sources), beam_size, self.search, n_best,
                             constraints)  # fmt: skip

    def source_limit(self) -> int:
        """The model's positions; a decoder-only model holds source and translation in one
        sequence, so its sources leave room for the longest translation the search allows."""
        limit = self.model.config.max_positions
        if self.model.config.decoder_only:
            limit = self.search.source_limit(limit)
        return limit

    def batch_budget(self, max_tokens: int, beam_size: int) -> int:
        """Our search decodes beam_size rows per source."""
        return max(1, max_tokens // beam_size)

    def with_search(self, **changes: Any) -> TorchEngine:
        return TorchEngine(self.model, replace(self.search, **changes))

    def attention(self, source: list[int], target: list[int]) -> torch.Tensor:
        """Cross-attention of ``target`` (its tokens, then eos) over ``source``, mean over
        layers and heads: (T + 1, S). A decoder-only translator's is the self-attention of its
        target positions over its source positions."""
        model, config = self.model, self.model.config
        device = self.model.embedding.weight.device
        if config.decoder_only:
            prompt = translation_prompt(source, config)
            sequence = torch.tensor([prompt + target + [config.eos_id]], device=device)
            maps = self_attention_maps(model, sequence)
            # Position len(prompt) - 1 + t predicted target token t; the source is 1..|src|.
            rows = slice(len(prompt) - 1, len(prompt) + len(target))
            maps = [m[:, :, rows, 1 : 1 + len(source)] for m in maps]
        else:
            src = torch.tensor([source], device=device)
            tgt_in = torch.tensor([[config.bos_id, *target]], device=device)
            maps = cross_attention_maps(model, src, tgt_in)
        return torch.stack([m[0].float().mean(dim=0) for m in maps]).mean(dim=0).cpu()

    def _pad(self, rows: list[list[int]]) -> torch.Tensor:
        pad = self.model.config.pad_id
        width = max(len(r) for r in rows)
        device = self.model.embedding.weight.device
        return torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)


class Translator:
    """A decoding engine plus its tokenizer: English lines in, Chinese lines out.

    Example:
        >>> translator = Translator.from_checkpoint("runs/demo/checkpoints/last.ckpt")
        >>> translator.translate(["I love you."], beam_size=5)
        ['我爱你。']
    """

    def __init__(self, engine: Engine, tokenizer) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self._split_batches = 0  # batches split after running out of memory, per call

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, device: str = "cpu", quantize: str | None = None
    ) -> Translator:
        """Build everything from a ``.ckpt`` written by ``seq2seq fit``: an encoder-decoder
        model, or a decoder-only one trained on joined pairs (``configs/lm_translate.yaml``).
        On the CPU in float32 its weights are packed for inference, or with
        ``quantize="int8"`` quantized to int8 (``seq2seq.inference.cpu.prepare_for_inference``)."""
        check_quantize(quantize, device)
        loaded = load_model(path, device)
        if loaded.is_language_model:
            raise CheckpointError(
                f"{path}: a language model, not a translation model; use 'seq2seq generate'"
            )
        engine = TorchEngine(prepare_for_inference(loaded.model, quantize), loaded.search)
        return cls(engine, loaded.tokenizer)

    @classmethod
    def from_ctranslate2(
        cls, directory: str | Path, device: str = "cpu", quantize: str | None = None
    ) -> Translator:
        """A translator over a ``seq2seq export --format ctranslate2`` directory;
        ``quantize="int8"`` has CTranslate2 quantize a float32 export as it loads it."""
        from seq2seq.inference.ctranslate2_engine import CTranslate2Engine

        check_quantize(quantize, device)
        engine = CTranslate2Engine(directory, device=device, compute_type=quantize or "default")
        return cls(engine, engine.tokenizer)

    @property
    def search(self) -> SearchConfig:
        return self.engine.search

    def with_search(self, **overrides: Any) -> Translator:
        """A translator sharing this engine, with some search settings changed (None = keep)."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        return Translator(self.engine.with_search(**changes), self.tokenizer)

    def translate(
        self,
        lines: Sequence[str],
        beam_size: int = 5,
        max_tokens: int = 4000,
        on_batch: Callable[[int], None] | None = None,
        split: bool = True,
        on_total: Callable[[int], None] | None = None,
        first_line: int = 1,
        glossary: Glossary | None = None,
    ) -> list[str]:
        """Translate ``lines``: exactly one output string (without newlines) per input line.

        Args:
            lines: English text, one line each (a paragraph or a sentence); empty lines give
                empty outputs.
            beam_size: 1 = greedy search.
            max_tokens: padded decoder rows x source length per batch: a batch holds
                ``max_tokens / beam_size`` source tokens, so memory and speed do not depend on
                the beam (beam 5 on the demo test set: 6.7 s at 800 source tokens per batch,
                7.7 s at 4,000, 9.5 s at 8,000).
            on_batch: called with the number of sentences finished after each batch.
            split: split each line into sentences and translate those (the model was trained
                on sentences); False: each line is one sentence (one-sentence-per-line data).
            on_total: called once with the number of distinct sentences (pieces) to decode.
            first_line: the number of ``lines[0]`` in its file, for warnings naming lines.
            glossary: terms each sentence's translation must use where the sentence holds
                their English side (constrained beam search, at ``constrained_beam``'s beam);
                a term that could not be placed is named in a warning.
        """
        documents = [parse_text(line.replace("\n", " ")) for line in lines]
        outputs = self.translate_documents(documents, beam_size, max_tokens, split, on_batch,
                                           on_total, first_line, glossary)  # fmt: skip
        return [one_line(text) for text in outputs]

    def translate_stream(
        self,
        lines: Iterable[str],
        beam_size: int = 5,
        max_tokens: int = 4000,
        split: bool = True,
        window: int = DEFAULT_WINDOW,
        on_window: Callable[[int], None] | None = None,
        on_batch: Callable[[int], None] | None = None,
        on_total: Callable[[int], None] | None = None,
        glossary: Glossary | None = None,
    ) -> Iterator[list[str]]:
        """``translate`` of a stream of lines, ``window`` lines at a time (Marian's
        maxi-batch): each window's outputs, in input order, as soon as they are done, so a
        long file shows output early and an interrupted run keeps what was finished.

        Sorting by length and token batching happen within a window; with windows of 1,000
        lines the demo test set decodes as fast as in one pass (README, "Streamed output";
        ``seq2seq translate`` decodes the same windows, with ``--n-best`` as an option).
        ``on_window`` is called with each window's number of lines before it is decoded;
        ``on_batch``, ``on_total`` and ``glossary`` as in ``translate``, per window.
        """
        done = 0
        for chunk in line_windows(lines, window):
            if on_window is not None:
                on_window(len(chunk))
            yield self.translate(chunk, beam_size, max_tokens, on_batch, split, on_total,
                                 first_line=done + 1, glossary=glossary)  # fmt: skip
            done += len(chunk)

    def translate_n_best(
        self,
        lines: Sequence[str],
        n_best: int,
        beam_size: int = 5,
        max_tokens: int = 4000,
        split: bool = True,
        on_batch: Callable[[int], None] | None = None,
        on_total: Callable[[int], None] | None = None,
        glossary: Glossary | None = None,
        first_line: int = 1,
    ) -> list[list[Hypothesis]]:
        """The ``n_best`` best translations of each line, best first, each a ``Hypothesis``
        with its ``text``. A line of several sentences has each sentence searched apart; its
        candidates are the ``n_best`` combinations of their hypotheses with the highest summed
        score (``TextBatch.n_best``). An empty line has one empty hypothesis (score 0), so no
        line is left without an answer."""
        documents = [parse_text(line.replace("\n", " ")) for line in lines]
        batch = TextBatch(documents, split)
        found = self.translate_sentences(batch.sentences, beam_size, max_tokens, n_best,
                                         on_batch=on_batch, on_total=on_total,
                                         glossary=glossary)  # fmt: skip
        _warn_missing(batch, found, first_line)
        return [[replace(h, text=one_line(h.text)) for h in batch.n_best(i, found, n_best)]
                for i in range(len(lines))]  # fmt: skip

    def translate_text(
        self, texts: Sequence[str], format: str = "text", beam_size: int = 5,
        max_tokens: int = 4000, split: bool = True, source: str = "<input>",
        glossary: Glossary | None = None,
    ) -> list[str]:  # fmt: skip
        """Translate whole texts in ``format`` (text, html, markdown, srt), keeping their
        markup and line breaks; one output text per input text.

        Raises:
            DataError: HTML or SRT that does not parse (naming ``source`` and the line).
        """
        documents = [parse(text, format, source) for text in texts]
        return self.translate_documents(documents, beam_size, max_tokens, split,
                                        glossary=glossary)  # fmt: skip

    def translate_documents(
        self,
        documents: list[Document],
        beam_size: int = 5,
        max_tokens: int = 4000,
        split: bool = True,
        on_batch: Callable[[int], None] | None = None,
        on_total: Callable[[int], None] | None = None,
        first_line: int = 1,
        glossary: Glossary | None = None,
    ) -> list[str]:
        """Parsed documents (``seq2seq.formats``) translated: every distinct sentence of all
        of them decoded in one token-batched pass, then each document rebuilt. A warning
        names document i as line ``first_line + i``."""
        batch = TextBatch(documents, split)
        found = self.translate_sentences(batch.sentences, beam_size, max_tokens, 1,
                                         batch.aligned, on_batch, on_total, glossary)  # fmt: skip
        _warn_missing(batch, found, first_line)
        windowed = [first_line - 1 + number for number in windowed_lines(batch, found)]
        if windowed:
            limit = self.engine.source_limit()
            warn_lines(f"{len(windowed)} input(s) held a sentence longer than the model's "
                       f"{limit} tokens with no clause punctuation to cut it at; it was "
                       "translated in windows, not as a whole", windowed)  # fmt: skip
        return batch.rebuild(found)

    def translate_sentences(
        self,
        sentences: Sequence[str],
        beam_size: int = 5,
        max_tokens: int = 4000,
        n_best: int = 1,
        aligned: Sequence[bool] | None = None,
        on_batch: Callable[[int], None] | None = None,
        on_total: Callable[[int], None] | None = None,
        glossary: Glossary | None = None,
    ) -> list[SentenceTranslation]:
        """Each sentence translated whole, or, when longer than the model takes, in pieces
        (``plan``); ``aligned[i]``: also align sentence i's best translation to its words;
        ``glossary``: terms forced where their English side occurs (``piece_terms``)."""
        plans = self.plan(sentences)
        encoded = [piece.ids for plan in plans for piece in plan]
        if on_total is not None:
            on_total(sum(1 for ids in encoded if ids))
        terms = self.piece_terms(sentences, plans, glossary)
        found = self.decode_encoded(encoded, beam_size, max_tokens, n_best, on_batch,
                                    self.constraints(terms))  # fmt: skip
        return self.finish(sentences, plans, found, n_best, aligned, terms)

    def piece_terms(self, sentences: Sequence[str], plans: list[list[Piece]],
                    glossary: Glossary | None) -> list[list[Term]]:  # fmt: skip
        """The glossary terms of each piece, in plan order: those whose English side occurs
        in the piece's words (a sentence cut into pieces has each term forced in its own
        piece). [] for every piece without a glossary."""
        if not glossary:
            return [[] for plan in plans for _ in plan]
        terms = []
        for sentence, plan in zip(sentences, plans, strict=True):
            words = sentence.split()
            for piece in plan:
                text = sentence if len(plan) == 1 else " ".join(words[slice(*piece.words)])
                terms.append(glossary.terms_in(text) if piece.ids else [])
        return terms

    def constraints(self, terms: Sequence[Sequence[Term]]) -> list[Constraints | None] | None:
        """Each piece's constraints (None where it has no term); None when no piece has any."""
        if not any(terms):
            return None
        if not getattr(self.engine, "constrains", False):
            raise ValueError("glossaries need the torch engine (CTranslate2 has no constrained "
                             "beam search)")  # fmt: skip
        return [term_constraints(self.tokenizer, found) if found else None for found in terms]

    def plan(self, sentences: Sequence[str]) -> list[list[Piece]]:
        """The pieces each sentence is decoded as: itself, or for a sentence longer than the
        engine takes, its clauses (cut after , ; : and before dashes) packed up to the limit,
        and a clause still too long cut into windows of tokens at word starts."""
        limit = self.engine.source_limit()
        return [self._pieces(sentence, limit) for sentence in sentences]

    def finish(
        self,
        sentences: Sequence[str],
        plans: list[list[Piece]],
        found: list[list[Hypothesis]],
        n_best: int = 1,
        aligned: Sequence[bool] | None = None,
        terms: Sequence[Sequence[Term]] | None = None,
    ) -> list[SentenceTranslation]:
        """Sentence translations from their pieces' hypotheses (``found``, in plan order);
        ``terms`` (per piece, ``piece_terms``): each sentence's ``missing`` are those of its
        terms its best translation does not hold."""
        results, start = [], 0
        for index, (sentence, plan) in enumerate(zip(sentences, plans, strict=True)):
            hyps = found[start : start + len(plan)]
            result = self._sentence(sentence, plan, hyps, n_best, bool(aligned and aligned[index]))
            if terms is not None:
                own = list(dict.fromkeys(t for piece in terms[start : start + len(plan)]
                                         for t in piece))  # fmt: skip
                result.missing = missing_terms(own, result.texts[0] if result.texts else "")
            start += len(plan)
            results.append(result)
        return results

    def _sentence(self, sentence: str, plan: list[Piece], hyps: list[list[Hypothesis]],
                  n_best: int, align: bool) -> SentenceTranslation:  # fmt: skip
        combined = combine_hypotheses(hyps, n_best)
        texts = ["".join(self.text(found[min(k, len(found) - 1)].tokens) for found in hyps
                         if found) for k in range(len(combined))]  # fmt: skip
        result = SentenceTranslation(combined, texts, pieces=len(plan),
                                     windowed=any(p.windowed for p in plan))  # fmt: skip
        if align and combined:
            words = [m.span() for m in re.finditer(r"\S+", sentence)]
            result.alignment = [span for piece, found in zip(plan, hyps, strict=True) if found
                                for span in self._align(piece, found[0], words)]  # fmt: skip
        return result

    def text(self, tokens: Sequence[int]) -> str:
        """The text of output tokens, on one line."""
        return one_line(self.tokenizer.decode(tokens))

    def _pieces(self, sentence: str, limit: int) -> list[Piece]:
        ids = self.encode_sentence(sentence)
        n_words = len(sentence.split())
        if len(ids) <= limit:
            return [Piece(ids, (0, n_words))]
        pieces: list[Piece] = []
        word = 0
        eos = int(self.tokenizer.source_ends_with_eos)
        for text in _pack(clauses(sentence), limit - eos, self._clause_length):
            ids, count = self.encode_sentence(text), len(text.split())
            if len(ids) <= limit:
                pieces.append(Piece(ids, (word, word + count)))
            else:
                pieces += self._windows(ids, limit, word)
            word += count
        return pieces

    def _clause_length(self, text: str) -> int:
        """Tokens ``text`` adds to a source it is joined into: a source's eos comes once,
        however many clauses it joins."""
        return len(self.encode_sentence(text)) - int(self.tokenizer.source_ends_with_eos)

    def encode_sentence(self, text: str) -> list[int]:
        """Source ids of one sentence (normalised; [] for white space), not cut."""
        text = normalize_en(text)
        return self.tokenizer.encode_source(text) if text.strip() else []

    def _windows(self, ids: list[int], limit: int, word: int) -> list[Piece]:
        """``ids`` cut into windows of at most ``limit`` tokens, each starting a word where
        possible (a source that ends with eos keeps it at the end of every window)."""
        eos = ids[-1:] if self.tokenizer.source_ends_with_eos else []
        body, width = ids[: len(ids) - len(eos)], limit - len(eos)
        piece_of = self.tokenizer.id_to_piece
        starts = [i for i, t in enumerate(body) if piece_of(t).startswith(WORD_START)]
        windows, begin = [], 0
        while begin < len(body):
            cuts = [i for i in starts if begin < i <= begin + width]
            end = cuts[-1] if cuts and begin + width < len(body) else min(len(body), begin + width)
            count = sum(1 for i in starts if begin <= i < end) or 1
            windows.append(Piece(body[begin:end] + eos, (word, word + count), windowed=True))
            begin, word = end, word + count
        return windows

    def _align(self, piece: Piece, best: Hypothesis, words: list[tuple[int, int]]) -> Alignment:
        """For each character of ``best``'s text: the span of the sentence word its token
        attends to most (mean cross-attention of the layers and heads)."""
        text_of = self.tokenizer.decode
        ends, longest = [], 0
        for k in range(1, len(best.tokens) + 1):  # each token's end in the text (monotone)
            longest = max(longest, len(text_of(best.tokens[:k])))
            ends.append(longest)
        text = self.text(best.tokens)
        length = len(text)
        first, last = piece.words
        own = words[first : max(first + 1, last)] or [(0, 0)]
        attention = getattr(self.engine, "attention", None)
        if attention is None or not piece.ids:
            low, high = own[0][0], own[-1][1]
            return [None if span is None else (low + span[0], low + span[1])
                    for span in monotonic_alignment(high - low, length)]  # fmt: skip
        weights = attention(piece.ids, list(best.tokens))  # (T + 1, S)
        token_span = _source_spans(piece.ids, self.tokenizer, own)
        spans: Alignment = []
        start = 0
        for t, end in enumerate(ends):
            span = token_span[int(weights[t].argmax())]
            end = min(end, length)
            chunk = text[start:end]
            space = len(chunk) - len(chunk.lstrip())  # a word's leading space is between words
            spans += [None] * space + [span] * (end - start - space)
            start = end
        return spans + [None] * (length - len(spans))

    def translate_hypotheses(
        self,
        lines: Sequence[str],
        beam_size: int = 5,
        max_tokens: int = 4000,
        n_best: int = 1,
        on_batch: Callable[[int], None] | None = None,
    ) -> list[list[Hypothesis]]:
        """The ``n_best`` hypotheses (ids and scores) of each line, taken whole as one
        sentence (a line over the model's limit in pieces, their k-th hypotheses joined);
        [] for an empty line. ``translate_sentences`` gives their texts too."""
        found = self.translate_sentences([line.replace("\n", " ") for line in lines], beam_size,
                                         max_tokens, n_best, on_batch=on_batch)  # fmt: skip
        return [[replace(h, text=text) for h, text in zip(s.hypotheses, s.texts, strict=True)]
                for s in found]  # fmt: skip

    def decode_encoded(
        self,
        encoded: Sequence[list[int]],
        beam_size: int = 5,
        max_tokens: int = 4000,
        n_best: int = 1,
        on_batch: Callable[[int], None] | None = None,
        constraints: Sequence[Constraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        """``translate_hypotheses`` of sources already encoded by ``encode`` (a server
        encodes each request as it arrives and decodes many requests' sources together).

        ``constraints[i]``: what source i's output must hold. Sources with constraints are
        batched apart, by their beam (``constrained_beam``); the others decode exactly as
        without them.
        """
        outputs: list[list[Hypothesis]] = [[] for _ in encoded]
        self._split_batches = 0
        constraints = constraints or [None] * len(encoded)
        groups: dict[tuple[bool, int], list[int]] = {}  # (constrained, beam) -> sources
        for i, c in enumerate(constraints):
            key = (False, beam_size) if c is None else (True, constrained_beam(beam_size, c))
            groups.setdefault(key, []).append(i)
        for (steered, beam), group in sorted(groups.items()):
            budget = self.engine.batch_budget(max_tokens, beam)
            for batch in token_batches([encoded[i] for i in group], budget):
                rows = [group[i] for i in batch]
                wanted = [constraints[i] for i in rows] if steered else None
                found = self._hypotheses([encoded[i] for i in rows], beam, n_best, wanted)
                for index, hyps in zip(rows, found, strict=True):
                    outputs[index] = hyps
                if on_batch is not None:
                    on_batch(len(batch))
        if self._split_batches:
            print(
                f"warning: {self._split_batches} batch(es) ran out of memory and were split and "
                "retried; a smaller --max-tokens avoids the retries",
                file=sys.stderr,
            )
        return outputs

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        """Normalised, tokenised sources, cut to the engine's source limit (with a warning
        naming the lines cut)."""
        from seq2seq.data.clean import normalize_en

        # A blank line stays blank (a Marian model's tokenizer would give it a language token
        # and an eos to translate).
        texts = [normalize_en(line) for line in lines]
        encoded = [self.tokenizer.encode_source(text) if text.strip() else [] for text in texts]
        limit = self.engine.source_limit()
        cut = [i + 1 for i, ids in enumerate(encoded) if len(ids) > limit]
        for i in cut:
            encoded[i - 1] = cut_source(encoded[i - 1], limit, self.tokenizer)
        if cut:
            warn_lines(f"truncated {len(cut)} over-long input line(s) to {limit} tokens", cut)
        return encoded

    def _hypotheses(
        self,
        sources: list[list[int]],
        beam_size: int,
        n_best: int,
        constraints: list[Constraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        """The engine's hypotheses for one batch. A batch that runs out of (GPU) memory is
        split in halves and retried, so one oversized batch never aborts a file."""
        try:
            if constraints is None:  # engines without constrained search take no argument
                return self.engine.hypotheses(sources, beam_size, n_best)
            return self.engine.hypotheses(sources, beam_size, n_best, constraints)
        except torch.cuda.OutOfMemoryError:  # (= torch.OutOfMemoryError from torch 2.5)
            if len(sources) == 1:
                raise MemoryError(
                    f"out of memory translating a single sentence of {len(sources[0])} tokens "
                    f"on {self.engine.device}"
                ) from None
        self._split_batches += 1
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # hand the failed attempt's blocks back before retrying
        half = len(sources) // 2
        first, second = (None, None) if constraints is None else (constraints[:half],
                                                                 constraints[half:])  # fmt: skip
        return self._hypotheses(sources[:half], beam_size, n_best, first) + self._hypotheses(
            sources[half:], beam_size, n_best, second
        )


@dataclass
class Piece:
    """What the engine decodes for (part of) a sentence: source ids, and the sentence's words
    ``[first, last)`` they cover; ``windowed``: cut at a token limit, not at punctuation."""

    ids: list[int]
    words: tuple[int, int]
    windowed: bool = False


def _pack(texts: list[str], limit: int, length: Callable[[str], int]) -> list[str]:
    """Consecutive ``texts`` joined (with spaces) into as few pieces as stay within
    ``limit`` tokens by their separate ``length``s."""
    packed: list[str] = []
    tokens = 0
    for text in texts:
        count = length(text)
        if packed and tokens + count <= limit:
            packed[-1] += " " + text
            tokens += count
        else:
            packed.append(text)
            tokens = count
    return packed


def _source_spans(ids: list[int], tokenizer: Any,
                  words: list[tuple[int, int]]) -> list[tuple[int, int] | None]:  # fmt: skip
    """For each source token, the characters of the sentence it spells: its word's, narrowed
    by the lengths of the pieces before it in the word (so "." in "tea." is apart from
    "tea"). None before the first word (a language token); an eos counts with the last word."""
    spans: list[tuple[int, int] | None] = []
    word, position = -1, 0
    for token in ids:
        piece = tokenizer.id_to_piece(token)
        if piece.startswith(WORD_START) and word + 1 < len(words):
            word += 1
            position = words[word][0]
        if word < 0:
            spans.append(None)
            continue
        byte_piece = piece.startswith("<") and piece.endswith(">")
        surface = 1 if byte_piece else len(piece.lstrip(WORD_START))
        start, end = words[word]
        low = min(position, end - 1)
        spans.append((low, max(low + 1, min(end, position + surface))))
        position += surface
    return spans


def constrained_beam(beam_size: int, constraints: Constraints) -> int:
    """The beam a sentence with constraints is searched with: the beam asked for, at least
    ``MIN_CONSTRAINED_BEAM``, and a slot for each bank (constraint tokens met, 0..tokens) up
    to ``MAX_CONSTRAINED_BEAM``: with fewer slots than banks, the highest banks take them all
    and the terms are pasted wherever they come first. It depends on the sentence alone, so
    a sentence's translation never depends on its neighbours."""
    wanted = max(beam_size, MIN_CONSTRAINED_BEAM, constraints.tokens + 1)
    return max(beam_size, min(wanted, MAX_CONSTRAINED_BEAM))


def _warn_missing(batch: TextBatch, found: list[SentenceTranslation], first_line: int) -> None:
    """Name, on stderr, the inputs whose translation lacks a glossary term it should hold."""
    lines, terms = [], {}
    for number in range(len(batch.documents)):
        missing = [t for ids in batch.segment_sentences(number) for i in ids
                   for t in found[i].missing]  # fmt: skip
        if missing:
            lines.append(first_line + number)
            terms.update((t.source, None) for t in missing)
    if lines:
        shown = ", ".join(list(terms)[:10]) + (", ..." if len(terms) > 10 else "")
        warn_lines(f"{len(lines)} input(s) lack glossary term(s) the search could not place "
                   f"within the length limit ({shown})", lines)  # fmt: skip


def cut_source(ids: list[int], limit: int, tokenizer: Any) -> list[int]:
    """The first ``limit`` ids of an encoded source. A source that ends in an eos (the
    tokenizer's ``source_ends_with_eos``) keeps it: the model has never seen one without."""
    if len(ids) <= limit:
        return ids
    if tokenizer.source_ends_with_eos:
        return ids[: limit - 1] + ids[-1:]
    return ids[:limit]


def line_windows(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    """``lines`` in consecutive lists of ``size`` (the last one shorter), read lazily."""
    if size < 1:
        raise ValueError(f"window must be >= 1 line, got {size}")
    window: list[str] = []
    for line in lines:
        window.append(line)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def token_batches(encoded: list[list[int]], max_tokens: int, extra: int = 0) -> Iterable[list[int]]:
    """Indices of non-empty inputs, longest first, in batches of <= max_tokens padded tokens;
    each row costs its input plus ``extra`` positions (the new tokens of a generation)."""
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: -len(encoded[i]))
    batch: list[int] = []
    for index in order:
        width = (len(encoded[batch[0]]) if batch else len(encoded[index])) + extra
        if batch and (len(batch) + 1) * width > max_tokens:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch
