"""Decoding with either model: the benchmark's decoders (fixed or natural output lengths) and
Marian translations of whole test sets.

Fixed lengths (random weights): every sentence gets exactly ``DECODE_STEPS`` decoder steps,
``DECODE_STEPS - 1`` tokens then a forced eos, so both models do equal work whatever their
weights. Ours: ``seq2seq.decoding.search.greedy_search`` / ``beam_search`` over a
``TransformerScorer`` whose eos is banned until the length limit forces it (``FixedLengthScorer``);
Marian: ``generate(min_new_tokens=DECODE_STEPS - 1, max_new_tokens=DECODE_STEPS)``. Natural lengths
(a
checkpoint): ours with ``translate_ids`` and the checkpoint's search settings, Marian with
``generate`` on the exact export of those weights (``seq2seq.tools.marian_weights.to_marian``) under
the same output limit.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

from seq2seq.inference.pieces import MAX_TOKENS

from .harness import rss_mib
from .reference import build_marian, generate, output_length, strip_specials

DECODE_STEPS = 24  # decoder steps per sentence at fixed lengths: 23 tokens, then the forced eos
SEARCHES = {"greedy": 1, "beam5": 5}  # name -> beam size

Decoder = Callable[[torch.Tensor], list[int]]  # source batch -> output lengths, eos included


def encode_sources(tokenizer, lines: list[str], limit: int) -> list[list[int]]:
    """Sources as our ``Translator`` encodes them: NFKC-normalised, tokenized ([] for a blank
    line), cut to ``limit`` (the model's positions; a source ending with eos keeps it)."""
    from seq2seq.data.clean import normalize_en
    from seq2seq.inference.pieces import cut_source

    texts = [normalize_en(line) for line in lines]
    return [
        cut_source(tokenizer.encode_source(text), limit, tokenizer) if text.strip() else []
        for text in texts
    ]


def decode_batches(
    tokenizer, sources: list[str], limit: int, batch_size: int, pad_id: int
) -> list[torch.Tensor]:
    """Non-empty encoded sources, sorted by length (longest first), right-padded batches."""
    encoded = sorted(
        (ids for ids in encode_sources(tokenizer, sources, limit) if ids), key=len, reverse=True
    )
    return [
        right_pad(encoded[i : i + batch_size], pad_id) for i in range(0, len(encoded), batch_size)
    ]


def right_pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


class FixedLengthScorer:
    """Wraps a Scorer to ban eos until the search's length limit forces it: fixed-length work."""

    def __init__(self, scorer, length: int, eos_id: int) -> None:
        self.scorer, self.length, self.eos_id = scorer, length, eos_id
        self.calls = 0

    def __call__(self, last_tokens: torch.Tensor) -> torch.Tensor:
        log_probs = self.scorer(last_tokens)
        self.calls += 1
        if self.calls < self.length:
            log_probs[:, self.eos_id] = float("-inf")
        return log_probs

    def reorder(self, index: torch.Tensor) -> None:
        self.scorer.reorder(index)


def decoder(model: str, settings: dict[str, Any], beam: int, checkpoint: str | None) -> Decoder:
    """The decoder of ``ours`` or ``marian``: the checkpoint's weights at natural lengths, or
    without one random weights of the shape of ``settings`` (``Recipe.model``) at fixed
    lengths."""
    if checkpoint:
        trained = {"ours": trained_ours_decoder, "marian": trained_marian_decoder}
        return trained[model](checkpoint, beam)
    return {"ours": ours_decoder, "marian": marian_decoder}[model](settings, beam)


def ours_decoder(settings: dict[str, Any], beam: int) -> Decoder:
    """Our search on our model (randomly initialised, packed as ``Translator`` packs it)."""
    from seq2seq.config import ModelConfig
    from seq2seq.decoding.beam import beam_search
    from seq2seq.decoding.decode import TransformerScorer, special_tokens
    from seq2seq.decoding.greedy import greedy_search
    from seq2seq.decoding.search import SearchConfig
    from seq2seq.inference.packed import pack_for_cpu_inference
    from seq2seq.model import Transformer

    model = pack_for_cpu_inference(Transformer(ModelConfig(**settings["config"])).eval())
    config, specials = SearchConfig(**settings["search"]), special_tokens(model.config)

    @torch.inference_mode()  # as translate_ids
    def decode(src: torch.Tensor) -> list[int]:
        max_lens = torch.full((src.shape[0],), DECODE_STEPS)
        scorer = TransformerScorer(model, src, beam, DECODE_STEPS)
        scorer = FixedLengthScorer(scorer, DECODE_STEPS, specials.eos)
        if beam == 1:
            best = greedy_search(scorer, max_lens, specials)
        else:
            best = [hyps[0] for hyps in beam_search(scorer, max_lens, beam, specials, config)]
        return [len(hyp.tokens) + 1 for hyp in best]

    return decode


def trained_ours_decoder(checkpoint: str, beam: int) -> Decoder:
    """``translate_ids`` with the checkpoint's weights and search settings."""
    from seq2seq.decoding.decode import translate_ids
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.inference.packed import pack_for_cpu_inference

    loaded = load_model(checkpoint)
    model = pack_for_cpu_inference(loaded.model)  # as Translator decodes

    def decode(src: torch.Tensor) -> list[int]:
        hyps = translate_ids(model, src, beam, loaded.search)
        return [len(h[0].tokens) + 1 for h in hyps]

    return decode


def marian_decoder(settings: dict[str, Any], beam: int) -> Decoder:
    """``MarianMTModel.generate`` (randomly initialised) at fixed lengths."""
    from seq2seq.config import ModelConfig
    from seq2seq.decoding.decode import special_tokens

    model = build_marian(settings["config"]).eval()
    specials = special_tokens(ModelConfig(**settings["config"]))
    alpha = settings["search"]["length_penalty"]

    def decode(src: torch.Tensor) -> list[int]:
        rows = generate(
            model,
            src,
            beam,
            specials,
            alpha,
            min_new_tokens=DECODE_STEPS - 1,
            max_new_tokens=DECODE_STEPS,
        )
        return [output_length(row, specials.eos) for row in rows]

    return decode


def trained_marian_decoder(checkpoint: str, beam: int) -> Decoder:
    """``generate`` on the exact MarianMTModel export of the checkpoint, with our output limit
    (a * source length + b, eos forced at it; one limit per batch, the longest source's) and
    length penalty alpha."""
    from seq2seq.decoding.decode import special_tokens
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.tools.marian_weights import to_marian

    loaded = load_model(checkpoint)
    model, search = to_marian(loaded.model), loaded.search
    specials = special_tokens(loaded.model.config)

    def decode(src: torch.Tensor) -> list[int]:
        longest = int((src != specials.pad).sum(dim=1).max())
        limit = int(longest * search.max_len_a) + search.max_len_b
        # min_new_tokens=1: our search's rule, no empty output.
        rows = generate(
            model,
            src,
            beam,
            specials,
            search.length_penalty,
            min_new_tokens=1,
            max_new_tokens=limit,
        )
        return [output_length(row, specials.eos) for row in rows]

    return decode


def timed_decoding(decode: Decoder, batches: list[torch.Tensor]) -> tuple[list[int], float, float]:
    """Decodes every batch after one untimed warm-up batch; (output lengths, seconds, RSS in MiB
    just before the timed loop)."""
    decode(batches[0])  # warm-up
    setup_rss = rss_mib()
    lengths: list[int] = []
    start = time.perf_counter()
    for src in batches:
        lengths += decode(src)
    return lengths, time.perf_counter() - start, setup_rss


def translate_marian(
    model,
    tokenizer,
    sources: list[str],
    beam_size: int,
    settings: dict[str, Any],
    max_tokens: int = MAX_TOKENS,
) -> tuple[list[str], float]:
    """Translate ``sources`` with ``generate``, batched by exact source length so that every
    sentence gets our limit ``int(a * len) + b`` (capped at max_positions), eos included;
    (translations, seconds). ``settings`` are ``TranslationModule``'s (``Recipe.model``)."""
    from seq2seq.config import ModelConfig
    from seq2seq.decoding.decode import special_tokens
    from seq2seq.decoding.search import SearchConfig
    from seq2seq.textio import one_line

    limit = settings["config"]["max_positions"]
    search = SearchConfig(**settings["search"])
    specials = special_tokens(ModelConfig(**settings["config"]))
    encoded = encode_sources(tokenizer, sources, limit)
    by_length: dict[int, list[int]] = defaultdict(list)
    for index, ids in enumerate(encoded):
        if ids:  # empty input, empty output, as in our Translator
            by_length[len(ids)].append(index)
    outputs = [""] * len(sources)
    model.eval()
    start = time.perf_counter()
    for length in sorted(by_length, reverse=True):
        indices = by_length[length]
        max_new = int(search.max_lengths(torch.tensor([length]), cap=limit)[0])
        per_batch = max(1, max_tokens // length)
        for first in range(0, len(indices), per_batch):
            rows = indices[first : first + per_batch]
            input_ids = torch.tensor([encoded[i] for i in rows])
            generated = generate(
                model,
                input_ids,
                beam_size,
                specials,
                search.length_penalty,
                min_new_tokens=1,
                max_new_tokens=max_new,
            )
            for index, row in zip(rows, generated, strict=True):
                outputs[index] = one_line(tokenizer.decode(strip_specials(row, specials)))
    return outputs, time.perf_counter() - start
