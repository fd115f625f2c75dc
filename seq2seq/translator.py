"""Translation from a checkpoint: lines in, one output line per input line, in order.

``Translator`` owns what every runtime shares: normalising and encoding lines, cutting
over-long sources, batching by tokens (longest first, so padding stays small), splitting a
batch that runs out of memory, and putting outputs back in input order. The decoding itself
comes from an engine: ``TorchEngine`` (our model and searches) here, ``CTranslate2Engine`` in
``seq2seq.ctranslate2_engine``; a server batching requests is one more user of the same seam.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import torch

from seq2seq.checkpoint import load_model
from seq2seq.errors import CheckpointError
from seq2seq.model import Transformer
from seq2seq.packing import check_quantize, prepare_for_inference
from seq2seq.scoring import translate_ids
from seq2seq.search import Hypothesis, SearchConfig
from seq2seq.textio import one_line, warn_lines


class Engine(Protocol):
    """A runtime that decodes batches of source ids: what ``Translator`` needs."""

    search: SearchConfig
    device: str

    def hypotheses(
        self, sources: list[list[int]], beam_size: int, n_best: int = 1
    ) -> list[list[Hypothesis]]:
        """The ``n_best`` best outputs of each source (ids without bos/eos), best first."""
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
    """Our Transformer and our searches (``seq2seq.scoring.translate_ids``)."""

    def __init__(self, model: Transformer, search: SearchConfig) -> None:
        self.model = model.eval()
        self.search = search

    @property
    def device(self) -> str:
        return str(self.model.embedding.weight.device)

    def hypotheses(
        self, sources: list[list[int]], beam_size: int, n_best: int = 1
    ) -> list[list[Hypothesis]]:
        return translate_ids(self.model, self._pad(sources), beam_size, self.search, n_best)

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
        ``quantize="int8"`` quantized to int8 (``seq2seq.packing.prepare_for_inference``)."""
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
        from seq2seq.ctranslate2_engine import CTranslate2Engine

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
    ) -> list[str]:
        """Translate ``lines``: exactly one output string (without newlines) per input line.

        Args:
            lines: English sentences; empty lines give empty outputs.
            beam_size: 1 = greedy search.
            max_tokens: padded decoder rows x source length per batch: a batch holds
                ``max_tokens / beam_size`` source tokens, so memory and speed do not depend on
                the beam (beam 5 on the demo test set: 6.7 s at 800 source tokens per batch,
                7.7 s at 4,000, 9.5 s at 8,000).
            on_batch: called with the number of lines finished after each batch (progress).
        """
        hypotheses = self.translate_hypotheses(lines, beam_size, max_tokens, on_batch=on_batch)
        return [one_line(self.tokenizer.decode(best[0].tokens)) if best else ""
                for best in hypotheses]  # fmt: skip

    def translate_hypotheses(
        self,
        lines: Sequence[str],
        beam_size: int = 5,
        max_tokens: int = 4000,
        n_best: int = 1,
        on_batch: Callable[[int], None] | None = None,
    ) -> list[list[Hypothesis]]:
        """The ``n_best`` hypotheses (ids and scores) of each line; [] for an empty line."""
        return self.decode_encoded(self.encode(lines), beam_size, max_tokens, n_best, on_batch)

    def decode_encoded(
        self,
        encoded: Sequence[list[int]],
        beam_size: int = 5,
        max_tokens: int = 4000,
        n_best: int = 1,
        on_batch: Callable[[int], None] | None = None,
    ) -> list[list[Hypothesis]]:
        """``translate_hypotheses`` of sources already encoded by ``encode`` (a server
        encodes each request as it arrives and decodes many requests' sources together)."""
        outputs: list[list[Hypothesis]] = [[] for _ in encoded]
        self._split_batches = 0
        budget = self.engine.batch_budget(max_tokens, beam_size)
        for batch in token_batches(encoded, budget):
            found = self._hypotheses([encoded[i] for i in batch], beam_size, n_best)
            for index, hyps in zip(batch, found, strict=True):
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
        self, sources: list[list[int]], beam_size: int, n_best: int
    ) -> list[list[Hypothesis]]:
        """The engine's hypotheses for one batch. A batch that runs out of (GPU) memory is
        split in halves and retried, so one oversized batch never aborts a file."""
        try:
            return self.engine.hypotheses(sources, beam_size, n_best)
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
        return self._hypotheses(sources[:half], beam_size, n_best) + self._hypotheses(
            sources[half:], beam_size, n_best
        )


def cut_source(ids: list[int], limit: int, tokenizer: Any) -> list[int]:
    """The first ``limit`` ids of an encoded source. A source that ends in an eos (Marian
    models read one) keeps it: the model has never seen a source without one."""
    if len(ids) <= limit:
        return ids
    if tokenizer.source_ends_with_eos:
        return ids[: limit - 1] + ids[-1:]
    return ids[:limit]


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
