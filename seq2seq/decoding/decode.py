"""Scorers: our Transformer seen through the ``Scorer`` interface the searches drive, and the
two entry points that put a model and a search together, ``translate_ids`` (greedy or beam
search for a source batch) and ``generate_ids`` (continuing prompts of a decoder-only model).

The searches (``seq2seq.decoding.search``) never see a model; everything that does lives here:
encoding the source once, the KV cache, the prompt layout of decoder-only models, and the special
token ids, read from the model's own config.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from seq2seq.attention import padding_mask
from seq2seq.config import ModelConfig
from seq2seq.decoding.beam import beam_search, constrained_beam_search
from seq2seq.decoding.constrained import Constraints
from seq2seq.decoding.greedy import greedy_search
from seq2seq.decoding.sampling import SamplingConfig, sample_search
from seq2seq.decoding.search import (
    NEG_INF,
    Hypothesis,
    Scorer,
    SearchConfig,
    SpecialTokens,
    TokenRules,
    written_lengths,
)
from seq2seq.decoding.shortlist import Narrowed, Shortlist
from seq2seq.model import Transformer


def special_tokens(config: ModelConfig, rules: TokenRules = TokenRules()) -> SpecialTokens:  # noqa: B008
    """The special ids a search needs, from the model's config (their one source), and the
    tokenizer's ``rules`` (pieces writing nothing visible, pieces never generated)."""
    return SpecialTokens(
        pad=config.pad_id,
        unk=config.unk_id,
        bos=config.bos_id,
        eos=config.eos_id,
        blank=rules.blank,
        banned=rules.banned,
        bytes=rules.bytes,
        term_tags=rules.term_tags,
        symbols=rules.symbols,
    )


ENCODE_GROUP = 32  # sources per encoder call in a batch of unequal lengths


def encode_by_length(model: Transformer, src_ids: Tensor, group: int = ENCODE_GROUP) -> Tensor:
    """``model.encode(src_ids)`` (B, S) -> (B, S, d_model), in groups of ``group`` sources of
    similar length, each cut to its own longest: a decoding batch of a few hundred sentences
    spans many lengths, and encoding its padding was 30% of the encoder's work on the demo
    test set. A source's encoding does not depend on its neighbours (padding is masked), so
    only the padding positions differ: zeros here, never attended to."""
    lengths = padding_mask(src_ids, model.config.pad_id).sum(dim=1)  # (B,)
    if src_ids.shape[0] <= group or src_ids.numel() < 1.2 * int(lengths.sum()):
        return model.encode(src_ids)  # little padding: one call costs less
    order = lengths.argsort(descending=True)
    memory = model.embedding.weight.new_zeros(*src_ids.shape, model.config.d_model)
    for start in range(0, len(order), group):
        rows = order[start : start + group]
        width = max(1, int(lengths[rows[0]]))  # the group's longest
        memory[rows, :width] = model.encode(src_ids[rows, :width])  # (group, width, d)
    return memory


class TransformerScorer:
    """Encodes a source batch once, then feeds one token per step through the KV cache.

    Rows are ordered sentence-major: row ``b * beam_size + j`` is beam j of sentence b, and
    ``reorder`` expects rows to move only among one sentence's beams (what ``beam_search``
    does), so the cross-attention keys/values never need to follow. With a shortlist
    (``Narrowed``) tokens are positions in its columns, and each row scores its own alone.
    """

    allowed: Tensor | None = None  # (N, U) each row's own candidates among the columns

    def __init__(
        self,
        model: Transformer,
        src_ids: Tensor,
        beam_size: int,
        max_len: int,
        narrowed: Narrowed | None = None,
    ) -> None:
        self.model = model
        # Encode each source and project its cross-attention keys/values once; each of its k
        # beams gets a copy of those.
        memory = encode_by_length(model, src_ids)  # (B, S, d)
        source_mask = padding_mask(src_ids, model.config.pad_id)  # (B, S)
        n_rows = src_ids.shape[0] * beam_size
        self.cache = model.init_cache(n_rows, max_len, memory, source_mask, copies=beam_size)
        if narrowed is not None:  # a shortlist: tokens are positions in its union's columns
            self.columns = narrowed.columns.to(src_ids.device)  # (U,)
            self.project = model.projection_onto(self.columns)  # the rows gathered once
            self.allowed = narrowed.allowed.to(src_ids.device).repeat_interleave(beam_size, 0)

    def __call__(self, last_tokens: Tensor) -> Tensor:
        if self.allowed is None:
            return self.model.decode(last_tokens[:, None], cache=self.cache)[:, -1].float()
        ids = self.columns[last_tokens][:, None]  # (N, 1) vocabulary ids
        logits = self.project(self.model.decoder_states(ids, cache=self.cache))[:, -1].float()
        return logits.masked_fill_(~self.allowed, NEG_INF)  # (N, U): each row's own alone

    def reorder(self, index: Tensor) -> None:
        # Searches move rows only among the k beams of one sentence, which share the source:
        # the cross-attention keys/values stay as they are (a change of row count copies all).
        self.cache.reorder(index, cross=False)
        if self.allowed is not None:
            self.allowed = self.allowed[index]


class PromptScorer(TransformerScorer):
    """Decoder-only: reads every prompt into the KV cache in one pass, then one token per step.

    Prompts of different lengths are left-padded, so each row's next token lands in the same
    cache slot; the padding is masked out and positions count from each prompt's first token,
    so a row's output does not depend on the other prompts of its batch. The first call
    returns the prompts' next-token logits (the tokens passed to it are ignored:
    the prompt already ends with the token to continue from).
    """

    def __init__(
        self, model: Transformer, prompts: Sequence[Sequence[int]], beam_size: int, max_new: int
    ) -> None:
        # Its own cache set-up; the step and the reorder are TransformerScorer's.
        if not prompts or min(map(len, prompts)) < 1:
            raise ValueError("every prompt needs at least one token (e.g. bos)")
        self.model = model
        pad, device = model.config.pad_id, model.embedding.weight.device
        width = max(map(len, prompts))
        ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=device)
        pad_left = torch.tensor([width - len(p) for p in prompts], device=device)
        self.cache = model.init_cache(len(prompts), width + max_new, pad_left=pad_left)
        states = model.decoder_states(ids, cache=self.cache)[:, -1]  # (B, d): last position only
        logits = model.project(states).float()  # (B, V)
        self._first: Tensor | None = logits.repeat_interleave(beam_size, dim=0)
        if beam_size > 1:  # each prompt's k beams start from copies of its cache rows
            rows = torch.arange(len(prompts), device=device)
            self.cache.reorder(rows.repeat_interleave(beam_size))

    def __call__(self, last_tokens: Tensor) -> Tensor:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        return super().__call__(last_tokens)


@torch.inference_mode()
def translate_ids(
    model: Transformer,
    src_ids: Tensor,
    beam_size: int = 5,
    config: SearchConfig | None = None,
    n_best: int = 1,
    constraints: Sequence[Constraints | None] | None = None,
    rules: TokenRules = TokenRules(),  # noqa: B008 (frozen)
    shortlist: Shortlist | None = None,
) -> list[list[Hypothesis]]:
    """Translate a right-padded batch of source ids (B, S) with greedy or beam search.

    ``beam_size=1`` runs greedy search. Returns ``n_best`` hypotheses per sentence. A
    decoder-only model continues the prompt ``[bos] source [sep]`` (``ModelConfig.sep_id``).
    ``constraints``: per sentence, what its output must hold (None: nothing); with any, the
    batch runs ``constrained_beam_search`` (whose unconstrained sentences come out as from
    beam search). ``rules``: the tokenizer's pieces that write nothing visible (which cannot
    end an output on their own) and that are never generated (``TokenRules``).
    ``shortlist``: each sentence writes only its source's candidates, the search running over
    the batch's union (``Narrowed``; encoder-decoder models; a sentence with constraints keeps
    the whole vocabulary).
    """
    config = config or SearchConfig()
    specials = special_tokens(model.config, rules)
    if model.config.decoder_only:
        if shortlist is not None:
            raise ValueError("a shortlist is for encoder-decoder models, not decoder-only ones")
        scorer, max_lens = _prompt_scorer(model, src_ids, beam_size, config, specials)
        return _search(scorer, max_lens, beam_size, specials, config, n_best, constraints)
    written = written_lengths(src_ids, specials.pad, specials.term_tags)
    max_lens = config.max_lengths(written, cap=model.config.max_positions)
    narrowed = None
    if shortlist is not None:
        allowed = shortlist.allowed(src_ids, specials.pad)
        for row, wanted in enumerate(constraints or ()):
            if wanted is not None and wanted.count:  # its terms may need any piece
                allowed[row] = True
        narrowed = Narrowed.of(allowed, specials)
        specials = narrowed.specials(specials)
    scorer = TransformerScorer(model, src_ids, beam_size, int(max_lens.max()), narrowed)
    found = _search(scorer, max_lens, beam_size, specials, config, n_best, constraints)
    return found if narrowed is None else narrowed.restore(found)


def _prompt_scorer(
    model: Transformer,
    src_ids: Tensor,
    beam_size: int,
    config: SearchConfig,
    specials: SpecialTokens,
) -> tuple[Scorer, Tensor]:
    """A decoder-only translator's scorer over ``[bos] source [sep]`` prompts, and each
    sentence's length limit."""
    src_lengths = padding_mask(src_ids, specials.pad).sum(dim=1)
    rows = zip(src_ids.tolist(), src_lengths.tolist(), strict=True)
    prompts = [translation_prompt(row[:n], model.config) for row, n in rows]
    # Each row's own room, so a long neighbour never shortens a sentence's limit.
    room = model.config.max_positions - torch.tensor([len(p) for p in prompts])
    if int(room.min()) < 1:
        raise ValueError("a prompt fills the model's positions: no room for a translation")
    limits = config.max_lengths(written_lengths(src_ids, specials.pad, specials.term_tags))
    max_lens = torch.minimum(limits, room.to(src_lengths.device))
    return PromptScorer(model, prompts, beam_size, int(max_lens.max())), max_lens


def _search(
    scorer: Scorer,
    max_lens: Tensor,
    beam_size: int,
    specials: SpecialTokens,
    config: SearchConfig,
    n_best: int,
    constraints: Sequence[Constraints | None] | None,
) -> list[list[Hypothesis]]:
    """Constrained beam search if any sentence has constraints, else greedy or beam search."""
    if constraints is not None and any(c is not None and c.count for c in constraints):
        return constrained_beam_search(
            scorer, max_lens, beam_size, specials, constraints, config, n_best
        )
    if beam_size == 1:
        return [[hyp] for hyp in greedy_search(scorer, max_lens, specials, config.guard)]
    return beam_search(scorer, max_lens, beam_size, specials, config, n_best)


def translation_prompt(source: Sequence[int], config: ModelConfig) -> list[int]:
    """``[bos] source [sep]``: what a decoder-only translation model continues with the
    target (the data layer trains on ``[bos] source [sep] target [eos]``)."""
    if config.sep_id is None:
        raise ValueError("a decoder-only translation model needs ModelConfig.sep_id")
    return [config.bos_id, *source, config.sep_id]


@torch.inference_mode()
def generate_ids(
    model: Transformer,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    sampling: SamplingConfig = SamplingConfig(),  # noqa: B008 (frozen)
    beam_size: int = 1,
    config: SearchConfig | None = None,
    on_token: Callable[[Tensor], None] | None = None,
    indices: Sequence[int] | None = None,
) -> list[list[int]]:
    """Continue each prompt of a decoder-only model by 1 to ``max_new_tokens`` tokens.

    ``beam_size`` > 1 runs beam search (``config``'s length penalty); otherwise tokens are
    sampled (temperature 0 = greedy), and ``on_token`` sees each step's (N,) tokens. Both
    follow ``config``'s repetition guard. As in
    translation the first new token is never eos: a continuation adds at least one token.

    Args:
        indices: each prompt's index in the caller's input, which picks its random stream
            (``SamplingConfig.seed``); 0..N-1 by default.

    Returns:
        The new tokens of each prompt, without the final eos.
    """
    mc = model.config
    if not mc.decoder_only:
        raise ValueError("generation needs a decoder-only model (decoder_only: true)")
    config = config or SearchConfig()
    specials = special_tokens(mc)
    device = model.embedding.weight.device
    # Each prompt's own room: a long prompt in the batch never shortens another's output.
    room = mc.max_positions - torch.tensor([len(p) for p in prompts], device=device)
    if int(room.min()) < 1:
        raise ValueError(f"the prompt fills all {mc.max_positions} positions of the model")
    limits = room.clamp(max=max_new_tokens)  # (N,) new tokens per prompt
    scorer = PromptScorer(model, prompts, beam_size, int(limits.max()) + 1)
    max_lens = limits + 1  # the searches count the eos that ends a row
    if beam_size > 1:
        hyps = beam_search(scorer, max_lens, beam_size, specials, config)
        return [best[0].tokens for best in hyps]
    out = sample_search(scorer, max_lens, sampling, specials, indices, on_token, config.guard)
    return [_strip_after_eos(row, specials.eos, specials.pad) for row in out.tolist()]


def _strip_after_eos(row: list[int], eos_id: int, pad_id: int) -> list[int]:
    if eos_id in row:
        row = row[: row.index(eos_id)]
    return [t for t in row if t != pad_id]
