"""Continuous batching for greedy translation: sentences join and leave the batch between
decoder steps (Orca's iteration-level scheduling; vLLM and TGI serve LMs this way).

A server decoding whole batches makes every request wait for the longest sentence of its batch,
and new requests wait for the whole batch. Here a finished sentence's answer goes out at once
and new sentences join a few steps later, so the decoder keeps computing rows that matter.

A sentence joining at cache step t is a row whose first t self-attention slots are left
padding (``KVCache.pad_left``): they are never attended to, and its positions count from its
own first token, exactly as for a prompt of a decoder-only batch. Its source joins the
cross-attention keys/values (padded to the longest source, masked). So each sentence follows
greedy search's rules (``search.restrict_next_tokens_``, per row) and gets what
``translate_ids(beam_size=1)`` gives it alone, whatever else is in the batch.

Joining costs an encoder pass and a copy of the cache, so it is batched too: finished rows
stay (ignored) and newcomers wait until they and the finished rows make up half of the
batch (or the batch is empty); then one rebuild drops the finished rows, appends the
newcomers and drops the cache slots no row reads any more.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch
from torch import Tensor

from seq2seq.attention import padding_mask
from seq2seq.cache import KVCache
from seq2seq.model import Transformer
from seq2seq.scoring import special_tokens
from seq2seq.search import NEG_INF, Hypothesis, SearchConfig, top_k_by_blocks

REBUILD_SHARE = 2  # rebuild when waiting + finished rows >= rows / REBUILD_SHARE


class ContinuousGreedy:
    """Greedy decoding of an encoder-decoder model over a batch that changes between steps.

    Example:
        >>> decoder = ContinuousGreedy(model, SearchConfig())
        >>> decoder.add([[5, 6, 7]], keys=["a"])
        >>> while decoder.active: finished = decoder.step()   # [(key, Hypothesis), ...]
    """

    def __init__(self, model: Transformer, search: SearchConfig) -> None:
        if model.config.decoder_only:
            raise ValueError("continuous batching here is for encoder-decoder models")
        self.model, self.search = model, search
        self.specials = special_tokens(model.config)
        self.device = model.embedding.weight.device
        self.reset()

    def reset(self) -> None:
        """Forget every sentence, decoding or waiting."""
        self.cache: KVCache | None = None
        self.waiting: list[tuple[list[int], Hashable]] = []  # (source, key) not yet joined
        # One entry per cache row: its key (None once finished), tokens so far, limit.
        self.keys: list[Hashable | None] = []
        self.tokens: list[list[int]] = []
        self.log_probs = torch.zeros(0)  # (N,) float32 sums, as greedy_search keeps them
        self.limits = torch.zeros(0, dtype=torch.long)  # (N,) max length, eos included
        self.last = torch.zeros(0, dtype=torch.long)  # (N,) the token to feed next
        self.source_lengths: list[int] = []  # (N,)
        self._source_tokens = 0  # of the sentences decoding or waiting

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
    def step(self) -> list[tuple[Hashable, Hypothesis]]:
        """One decoder step for every row (rebuilding the batch first when it pays); returns
        the sentences that finished."""
        finished_rows = sum(key is None for key in self.keys)
        if self.waiting or finished_rows:
            if finished_rows == len(self.keys) or (
                REBUILD_SHARE * (len(self.waiting) + finished_rows) >= len(self.keys)
            ):
                self._rebuild()
        if self.cache is None:
            return []
        cache = self.cache
        assert cache.pad_left is not None
        scores = self.model.decode(self.last.to(self.device)[:, None], cache=cache)[:, -1]
        log_probs = scores.float().log_softmax(dim=-1).cpu()  # (N, V)
        steps = cache.length - 1 - cache.pad_left.cpu()  # (N,) index of the token chosen now
        self._restrict(log_probs, steps)
        best_log_prob, best = top_k_by_blocks(log_probs, 1)
        best, best_log_prob = best[:, 0], best_log_prob[:, 0]
        self.log_probs += best_log_prob
        self.last = best
        finished = []
        for row, token in enumerate(best.tolist()):
            key = self.keys[row]
            if key is None:
                continue  # finished earlier; its row goes at the next rebuild
            if token == self.specials.eos:
                log_prob = float(self.log_probs[row])
                finished.append((key, Hypothesis(self.tokens[row], log_prob, log_prob)))
                self.keys[row] = None
                self._source_tokens -= self.source_lengths[row]
            else:
                self.tokens[row].append(token)
        return finished

    def _restrict(self, log_probs: Tensor, steps: Tensor) -> None:
        """``search.restrict_next_tokens_`` with each row at its own step, in place."""
        specials = self.specials
        log_probs[:, list(specials.never_generated)] = NEG_INF
        at_limit = steps >= self.limits - 1
        log_probs[(steps == 0) & ~at_limit, specials.eos] = NEG_INF  # no empty output
        if bool(at_limit.any()):
            eos_column = log_probs[at_limit, specials.eos].clone()
            log_probs[at_limit] = NEG_INF
            log_probs[at_limit, specials.eos] = eos_column

    def _rebuild(self) -> None:
        """One new cache: the unfinished rows (their filled slots shifted left past the slots
        no row reads) followed by the waiting sentences, encoded together."""
        live = [i for i, key in enumerate(self.keys) if key is not None]
        sources = [source for source, _ in self.waiting]
        if not live and not sources:
            self.reset()
            return
        old = self.cache
        shift = int(old.pad_left[live].min()) if old is not None and live else 0  # type: ignore[index]
        length = old.length - shift if old is not None and live else 0
        new = self._encoded(sources) if sources else None
        limits = torch.cat([self.limits[live], new[1] if new is not None else self.limits[:0]])
        pad_left = torch.cat([
            old.pad_left[live].cpu() - shift if old is not None and live else limits[:0],
            torch.full((len(sources),), length, dtype=torch.long),
        ])  # fmt: skip
        capacity = int((pad_left + limits).max())  # the last slot any row can write, + 1
        cache = self._empty(len(live) + len(sources), capacity, old or new[0])  # type: ignore[index]
        self._fill(cache, old, live, shift, length, new[0] if new is not None else None)
        cache.pad_left, cache.length = pad_left.to(self.device), length
        self.cache = cache
        self.keys = [self.keys[i] for i in live] + [key for _, key in self.waiting]
        self.tokens = [self.tokens[i] for i in live] + [[] for _ in sources]
        self.source_lengths = [self.source_lengths[i] for i in live] + [len(s) for s in sources]
        self.log_probs = torch.cat([self.log_probs[live], torch.zeros(len(sources))])
        self.limits = limits
        bos = torch.full((len(sources),), self.specials.bos, dtype=torch.long)
        self.last = torch.cat([self.last[live], bos])
        self.waiting = []

    def _encoded(self, sources: list[list[int]]) -> tuple[KVCache, Tensor]:
        """The new sentences' cross-attention keys/values (in a one-slot cache) and limits."""
        pad, width = self.specials.pad, max(map(len, sources))
        src = torch.tensor([[*s, *[pad] * (width - len(s))] for s in sources], device=self.device)
        source_mask = padding_mask(src, pad)  # (n, S)
        limits = self.search.max_lengths(source_mask.sum(dim=1),
                                         cap=self.model.config.max_positions)  # fmt: skip
        return self.model.init_cache(len(sources), 1, self.model.encode(src), source_mask), \
            limits.cpu()  # fmt: skip

    def _empty(self, rows: int, capacity: int, like: KVCache) -> KVCache:
        layers, _, heads, _, head_dim = like.self_k.shape
        return KVCache.empty(layers, rows, heads, head_dim, capacity, dtype=like.self_k.dtype,
                             device=self.device)  # fmt: skip

    def _fill(self, cache: KVCache, old: KVCache | None, live: list[int], shift: int,
              length: int, new: KVCache | None) -> None:  # fmt: skip
        """Copy the kept rows' filled slots and both groups' sources into ``cache``."""
        parts = ([old] if old is not None and live else []) + ([new] if new is not None else [])
        width = max(part.cross_k.shape[3] for part in parts)  # type: ignore[union-attr]
        layers, _, heads, _, head_dim = cache.self_k.shape
        cache.cross_k = cache.self_k.new_zeros(layers, cache.n_rows, heads, width, head_dim)
        cache.cross_v = torch.zeros_like(cache.cross_k)
        cache.source_mask = torch.zeros(cache.n_rows, width, dtype=torch.bool, device=self.device)
        rows = 0
        if old is not None and live:
            index = torch.tensor(live, device=self.device)
            kept = slice(0, len(live))
            filled = slice(shift, shift + length)
            cache.self_k[:, kept, :, :length] = old.self_k[:, index, :, filled]
            cache.self_v[:, kept, :, :length] = old.self_v[:, index, :, filled]
            rows = len(live)
        for part, index in ((old, live), (new, None)):
            if part is None or (part is old and not live):
                continue
            picked = torch.tensor(index, device=self.device) if index is not None else None
            k, v, mask = part.cross_k, part.cross_v, part.source_mask
            if picked is not None:
                k, v, mask = k[:, picked], v[:, picked], mask[picked]  # type: ignore[index]
            n, s = mask.shape  # type: ignore[union-attr]
            start = 0 if part is old else rows
            cache.cross_k[:, start : start + n, :, :s] = k
            cache.cross_v[:, start : start + n, :, :s] = v
            cache.source_mask[start : start + n, :s] = mask
