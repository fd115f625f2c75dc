"""Continuous batching for translation: sentences join and leave the batch between decoder
steps (Orca's iteration-level scheduling; vLLM and TGI serve LMs this way).

A server decoding whole batches makes every request wait for the longest sentence of its batch,
and new requests wait for the whole batch. Here a finished sentence's answer goes out at once
and new sentences join a few steps later, so the decoder keeps computing rows that matter.

A sentence joining at cache step t gets rows whose first t self-attention slots are left
padding (``KVCache.pad_left``): they are never attended to, and its positions count from its
own first token, exactly as for a prompt of a decoder-only batch. Its source joins the
cross-attention keys/values (padded to the longest source, masked). Each sentence then follows
the search's rules at its own step (the helpers of ``seq2seq.decoding.search`` take one step per
sentence) and gets what ``translate_ids`` gives it alone, whatever else is in the batch:
``ContinuousGreedy`` is greedy search, ``ContinuousBeam`` beam search (k rows a sentence).

Joining costs an encoder pass and a copy of the cache, so it is batched too: finished
sentences stay (ignored) and newcomers wait until they and the finished sentences make up half
of the batch (or the batch is empty); then one rebuild drops the finished sentences, appends
the newcomers and drops the cache slots no row reads any more.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch
from torch import Tensor

from seq2seq.attention import padding_mask
from seq2seq.cache import KVCache
from seq2seq.decoding.beam import (
    check_n_best,
    collect_finished,
    continuation_scores,
    select_open,
    top_continuations,
)
from seq2seq.decoding.decode import special_tokens
from seq2seq.decoding.search import (
    NEG_INF,
    Hypothesis,
    SearchConfig,
    TokenRules,
    restrict_next_tokens_,
    sentences_done,
    still_empty,
    top_k_by_blocks,
    written_lengths,
)
from seq2seq.model import Transformer

REBUILD_SHARE = 2  # rebuild when waiting + finished sentences >= sentences / REBUILD_SHARE


class ContinuousBatch:
    """What both searches share: sentences waiting, the cache and its rebuilds. A sentence
    holds ``rows`` consecutive cache rows (its beams). Subclasses keep their own per-sentence
    state (``_carry``) and choose tokens (``_choose``).

    Examples:
        >>> decoder = ContinuousGreedy(model, SearchConfig())
        >>> decoder.add([[5, 6, 7]], keys=["a"])
        >>> while decoder.active: finished = decoder.step()   # [(key, result), ...]
    """

    rows = 1

    def __init__(
        self,
        model: Transformer,
        search: SearchConfig,
        rules: TokenRules = TokenRules(),  # noqa: B008 (frozen)
    ) -> None:
        if model.config.decoder_only:
            raise ValueError("continuous batching here is for encoder-decoder models")
        self.model, self.search = model, search
        self.specials = special_tokens(model.config, rules)
        self.device = model.embedding.weight.device
        self.reset()

    def reset(self) -> None:
        """Forget every sentence, decoding or waiting."""
        self.cache: KVCache | None = None
        self.waiting: list[tuple[list[int], Hashable]] = []  # (source, key) not yet joined
        self.keys: list[Hashable | None] = []  # per sentence in the cache; None = finished
        self.limits = torch.zeros(0, dtype=torch.long)  # (n,) max length, eos included
        self.source_lengths: list[int] = []  # (n,)
        self._source_tokens = 0  # of the sentences decoding or waiting
        self._clear()

    @property
    def active(self) -> int:
        """Sentences decoding or waiting to join."""
        return len(self.waiting) + sum(key is not None for key in self.keys)

    @property
    def source_tokens(self) -> int:
        """Real source tokens of the active sentences (what a batch budget counts)."""
        return self._source_tokens

    def add(self, sources: Sequence[Sequence[int]], keys: Sequence[Hashable]) -> None:
        """Queue non-empty ``sources`` (ids) to join, each known by its key (not None)."""
        if any(len(source) < 1 for source in sources):
            raise ValueError("every source needs at least one token")
        self.waiting += [(list(source), key) for source, key in zip(sources, keys, strict=True)]
        self._source_tokens += sum(map(len, sources))

    @torch.inference_mode()
    def step(self) -> list[tuple[Hashable, object]]:
        """One decoder step for every row (rebuilding the batch first when it pays); returns
        the sentences that finished with their results."""
        finished_sentences = sum(key is None for key in self.keys)
        if self.waiting or finished_sentences:
            if finished_sentences == len(self.keys) or (
                REBUILD_SHARE * (len(self.waiting) + finished_sentences) >= len(self.keys)
            ):
                self._rebuild()
        if self.cache is None:
            return []
        cache = self.cache
        assert cache.pad_left is not None
        logits = self.model.decode(self._last().to(self.device)[:, None], cache=cache)[:, -1]
        # Each sentence's step: the index of the token chosen now.
        steps = cache.length - 1 - cache.pad_left[:: self.rows].cpu()  # (n,)
        finished = self._choose(logits.float().cpu(), steps)
        for index, _ in finished:
            self._source_tokens -= self.source_lengths[index]
        results = [(self.keys[index], result) for index, result in finished]
        for index, _ in finished:
            self.keys[index] = None
        return results

    # -- what a search adds --------------------------------------------------------------

    def _last(self) -> Tensor:
        """(N,) the tokens to feed next, one per row."""
        raise NotImplementedError

    def _choose(self, logits: Tensor, steps: Tensor) -> list[tuple[int, object]]:
        """Pick the next tokens from (N, V) logits; the sentences (indices) that ended now."""
        raise NotImplementedError

    def _clear(self) -> None:
        """Empty per-sentence state (no sentence yet)."""
        raise NotImplementedError

    def _carry(self, live: list[int], joining: int) -> None:
        """Keep the per-sentence state of sentences ``live`` and start ``joining`` new ones."""
        raise NotImplementedError

    # -- rebuilding the cache ------------------------------------------------------------

    def _rebuild(self) -> None:
        """One new cache: the unfinished sentences' rows (their filled slots shifted left past
        the slots no row reads) followed by the waiting sentences, encoded together."""
        live = [i for i, key in enumerate(self.keys) if key is not None]
        sources = [source for source, _ in self.waiting]
        if not live and not sources:
            self.reset()
            return
        parts = [self._kept(self.cache, live)] if self.cache is not None and live else []
        limits = self.limits[live]
        if sources:
            joining, joining_limits = self._encoded(sources)
            parts.append(joining)
            limits = torch.cat([limits, joining_limits])
        self.cache = KVCache.join(parts, max_steps=limits.repeat_interleave(self.rows))
        self.keys = [self.keys[i] for i in live] + [key for _, key in self.waiting]
        self.source_lengths = [self.source_lengths[i] for i in live] + [len(s) for s in sources]
        self.limits = limits
        self._carry(live, len(sources))
        self.waiting = []

    def _kept(self, cache: KVCache, live: list[int]) -> KVCache:
        """The rows of sentences ``live`` alone, without the slots none of them reads (the
        left padding they all share)."""
        k = self.rows
        rows = torch.tensor([i * k + j for i in live for j in range(k)], device=self.device)
        assert cache.pad_left is not None  # a continuous batch's rows are always left-padded
        return cache.compact(rows, shift=int(cache.pad_left[rows].min()))

    def _encoded(self, sources: list[list[int]]) -> tuple[KVCache, Tensor]:
        """The new sentences' rows (``rows`` each, no slot filled yet) with their
        cross-attention keys/values, and their (n,) length limits."""
        pad, width = self.specials.pad, max(map(len, sources))
        src = torch.tensor([[*s, *[pad] * (width - len(s))] for s in sources], device=self.device)
        source_mask = padding_mask(src, pad)  # (n, S)
        written = written_lengths(src, pad, self.specials.term_tags)
        limits = self.search.max_lengths(written, cap=self.model.config.max_positions)
        memory = self.model.encode(src)
        rows = len(sources) * self.rows
        cache = self.model.init_cache(rows, 0, memory, source_mask, copies=self.rows)
        return cache, limits.cpu()


class ContinuousGreedy(ContinuousBatch):
    """Greedy search (``search.greedy_search``'s choices) over a changing batch; each
    finished sentence's result is its ``Hypothesis``."""

    def _clear(self) -> None:
        self.tokens: list[list[int]] = []  # per sentence, so far
        self.log_probs = torch.zeros(0)  # (n,) float32 sums, as greedy_search keeps them
        self.last = torch.zeros(0, dtype=torch.long)  # (n,) the tokens to feed next
        self.empty = torch.zeros(0, dtype=torch.bool)  # (n,) nothing visible written yet
        # (n, W) the last tokens written, pad-filled on the left: the last three say whether a
        # character is open (utf8), the guard reads its window (all of them when it has none).
        window = self.search.guard.window
        self.window = None if window is None else max(3, window)
        self.recent = torch.zeros(0, self.window or 0, dtype=torch.long)

    def _carry(self, live: list[int], joining: int) -> None:
        self.tokens = [self.tokens[i] for i in live] + [[] for _ in range(joining)]
        self.log_probs = torch.cat([self.log_probs[live], torch.zeros(joining)])
        self.empty = torch.cat([self.empty[live], torch.ones(joining, dtype=torch.bool)])
        kept = self.recent[live]
        if self.window is None:  # all of them: drop the columns no sentence wrote in
            written = (kept != self.specials.pad).any(dim=0).nonzero()
            kept = kept[:, int(written[0]) :] if len(written) else kept[:, :0]
        nothing = torch.full((joining, kept.shape[1]), self.specials.pad, dtype=torch.long)
        self.recent = torch.cat([kept, nothing])
        bos = torch.full((joining,), self.specials.bos, dtype=torch.long)
        self.last = torch.cat([self.last[live], bos])

    def _last(self) -> Tensor:
        return self.last

    def _choose(self, logits: Tensor, steps: Tensor) -> list[tuple[int, object]]:
        guard, written = self.search.guard, self.recent[:, None]
        logits = guard.penalize_(logits[:, None], written, self.specials.pad)  # (n, 1, V)
        empty = self.empty[:, None] if self.specials.blank else None
        log_probs = restrict_next_tokens_(
            logits.log_softmax(dim=-1), steps, self.limits, self.specials, empty, written, guard
        )
        best_log_prob, best = top_k_by_blocks(log_probs[:, 0], 1)
        best, best_log_prob = best[:, 0], best_log_prob[:, 0]
        if self.specials.blank:  # a visible piece ends a sentence's emptiness for good
            self.empty &= still_empty(best[:, None], self.specials)
        self.log_probs += best_log_prob
        self.last = best
        kept = self.recent if self.window is None else self.recent[:, 1:]
        self.recent = torch.cat([kept, best[:, None]], dim=1)
        finished: list[tuple[int, object]] = []
        for index, token in enumerate(best.tolist()):
            if self.keys[index] is None:
                continue  # finished earlier; it goes at the next rebuild
            if token == self.specials.eos:
                log_prob = float(self.log_probs[index])
                finished.append((index, Hypothesis(self.tokens[index], log_prob, log_prob)))
            else:
                self.tokens[index].append(token)
        return finished


class ContinuousBeam(ContinuousBatch):
    """Beam search (``search.beam_search``'s choices) over a changing batch, ``beam_size``
    rows a sentence; each finished sentence's result is its ``n_best`` hypotheses."""

    def __init__(
        self,
        model: Transformer,
        search: SearchConfig,
        beam_size: int,
        n_best: int = 1,
        rules: TokenRules = TokenRules(),  # noqa: B008 (frozen)
    ) -> None:
        check_n_best(n_best, beam_size)
        self.rows, self.n_best = beam_size, n_best
        super().__init__(model, search, rules)

    def _clear(self) -> None:
        k = self.rows
        self.scores = torch.zeros(0, k)  # (n, k) log-probabilities of the open beams
        self.history = torch.zeros(0, k, 1, dtype=torch.long)  # (n, k, longest limit)
        self.found: list[list[Hypothesis]] = []  # finished hypotheses per sentence
        self.done = torch.zeros(0, dtype=torch.bool)
        self.last = torch.zeros(0, k, dtype=torch.long)  # (n, k) the tokens to feed next

    def _carry(self, live: list[int], joining: int) -> None:
        k = self.rows
        width = max(int(self.limits.max()) if len(self.limits) else 1, 1)
        history = torch.full((len(live) + joining, k, width), self.specials.pad, dtype=torch.long)
        kept = self.history[live][:, :, :width]
        history[: len(live), :, : kept.shape[2]] = kept
        self.history = history
        # Only beam 0 is alive at the start: the k copies would otherwise propose k identical sets.
        fresh = torch.full((joining, k), NEG_INF)
        fresh[:, 0] = 0.0
        self.scores = torch.cat([self.scores[live], fresh])
        self.found = [self.found[i] for i in live] + [[] for _ in range(joining)]
        self.done = torch.cat([self.done[live], torch.zeros(joining, dtype=torch.bool)])
        self.last = torch.cat([self.last[live], torch.full((joining, k), self.specials.bos)])

    def _last(self) -> Tensor:
        return self.last.reshape(-1)

    def _choose(self, logits: Tensor, steps: Tensor) -> list[tuple[int, object]]:
        """One step of ``search.beam_search`` with each sentence at its own step."""
        k, n = self.rows, len(self.keys)
        empty = still_empty(self.history, self.specials)
        scores = continuation_scores(
            logits.view(n, k, -1),
            self.scores,
            steps,
            self.limits,
            self.specials,
            empty,
            self.history,
            self.search.guard,
        )
        top = top_continuations(scores, k)
        collect_finished(
            self.found, self.done, self.history, steps, top, k, self.specials.eos, self.search
        )
        self.scores, chosen_beam, chosen_token = select_open(*top, k, self.specials.eos)
        was_done = self.done.clone()
        self.done |= sentences_done(self.found, self.scores, steps, self.limits, k, self.search)
        # Finished sentences keep their rows in place: nothing to copy for them.
        in_place = torch.arange(k)[None, :].expand(n, k)
        chosen_beam = torch.where(self.done[:, None], in_place, chosen_beam)
        self.history = self.history.gather(1, chosen_beam[:, :, None].expand_as(self.history))
        at = steps.clamp(max=self.history.shape[2] - 1)  # finished sentences may run past
        self.history[torch.arange(n)[:, None], torch.arange(k)[None, :], at[:, None]] = chosen_token
        self.last = chosen_token
        rows = chosen_beam + torch.arange(n)[:, None] * k  # (n, k)
        assert self.cache is not None  # step() decodes only with a cache
        self.cache.reorder(rows.reshape(-1).to(self.device), cross=False)
        ended = (self.done & ~was_done).nonzero()[:, 0].tolist()
        return [
            (i, sorted(self.found[i], key=lambda h: -h.score)[: self.n_best])
            for i in ended
            if self.keys[i] is not None
        ]
