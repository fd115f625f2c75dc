"""Token-budget batching's sampler: batches of example indices, each within ``max_tokens``.

Batches hold a variable number of sentence pairs so that each costs about ``max_tokens``
padded positions, the "~25k source + 25k target tokens per batch" recipe of the Transformer
paper scaled to one machine. Nothing here imports Lightning; the sampler and the loader that
wraps it (:mod:`seq2seq.data.loader`) just follow the ``state_dict``/``load_state_dict`` and
``sampler.set_epoch`` conventions that Lightning's fit loop looks for.

The sampler is built for corpora of 100M pairs under DDP: its memory per rank does not grow
with the corpus. It keeps the sorted lengths as a run-length code (one entry per distinct
length) and the batch boundaries as positions in the sorted order (one per batch); the
length-sorting permutation can be a memmapped file that all ranks share. Ties between equal
lengths are broken each epoch by a keyed permutation evaluated only where a batch needs it
(:mod:`seq2seq.data.permutation`), so a rank computes the members of its own batches only, one
batch at a time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
from torch.utils.data import Sampler

from seq2seq.data.permutation import keyed_permutation, permutation_keys

# ----------------------------------------------------------------------------- the sorted lengths
# The sampler never holds the lengths themselves, only their run-length code: the distinct
# lengths ascending, how many examples have each, and where each group starts in the sorted
# order. That is a few hundred numbers however large the corpus, which is what keeps every
# DDP rank's memory independent of the corpus size.
_CHUNK = 1 << 20  # examples counted per step: bounds the transient memory of the counting pass
_BINCOUNT_LIMIT = 1 << 20  # above this length a histogram would be wasteful; sort the chunk


def _length_counts(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct lengths, ascending, and how many examples have each.

    Reads ``lengths`` (which may be a memmap) in chunks, so the transient memory is one
    chunk's, not the corpus's.

    Shape:
        lengths: (N,) integers.
        returns: two (K,) int64 arrays, K the number of distinct lengths.
    """
    values, counts = [], []
    for begin in range(0, len(lengths), _CHUNK):
        part = np.asarray(lengths[begin : begin + _CHUNK], dtype=np.int64)
        if part.min() >= 0 and part.max() < _BINCOUNT_LIMIT:  # the usual case, and fast
            histogram = np.bincount(part)
            present = np.flatnonzero(histogram)
            values.append(present)
            counts.append(histogram[present])
        else:
            part_values, part_counts = np.unique(part, return_counts=True)
            values.append(part_values)
            counts.append(part_counts)
    if not values:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    distinct, where = np.unique(np.concatenate(values), return_inverse=True)
    total = np.zeros(len(distinct), np.int64)
    np.add.at(total, where, np.concatenate(counts))
    return distinct.astype(np.int64), total


def _greedy_starts(values: np.ndarray, counts: np.ndarray, max_tokens: int) -> np.ndarray:
    """Where each batch starts in the length-sorted order, cut greedily within ``max_tokens``.

    The rule, on the ascending lengths ``l``: a batch starting at ``s`` takes examples while
    ``(i - s + 1) * l[i] <= max_tokens`` (lengths ascend, so the newest example sets the padded
    width) and the first ``i`` that breaks it starts the next batch. On the run-length code that
    first ``i`` is, within group ``j`` (start ``G_j``, length ``L_j``),
    ``max(G_j, s + max_tokens // L_j)`` if that lies inside the group; otherwise the batch runs
    on into the next group. Inside one group the batches are all ``max_tokens // L_j`` long, so
    each group costs one vectorised step plus the walk of the batch that spills out of it.

    Shape:
        values, counts: (K,) the run-length code, see :func:`_length_counts`.
        returns: (B,) int64 start positions, ascending, the first 0 (empty if there are no
        examples); batch b is ``[starts[b], starts[b + 1])``, the last one runs to the end.
    """
    group_ends = np.cumsum(counts).tolist()
    group_starts = [0, *group_ends[:-1]]
    n = group_ends[-1] if group_ends else 0
    # Examples per batch of width L; lengths <= 0 never break the budget.
    capacity = [max_tokens // v if v > 0 else n for v in values.tolist()]
    pieces, start, group = [], 0, 0
    while start < n:  # `start` lies in `group`: 0, or where the last spilling batch was cut
        # Batches of this group's width that end inside the group, then the one that does not.
        full = (group_ends[group] - 1 - start) // capacity[group]
        pieces.append(start + capacity[group] * np.arange(full + 1, dtype=np.int64))
        last = start + capacity[group] * full
        start, group = n, group + 1
        while group < len(capacity):
            cut = max(group_starts[group], last + capacity[group])
            if cut < group_ends[group]:
                start = cut
                break
            group += 1
    return np.concatenate(pieces) if pieces else np.zeros(0, np.int64)


def _at_least(bounds: list[tuple[int, int]], count: int) -> list[tuple[int, int]]:
    """Halve the largest runs until there are ``count`` of them (or all are single examples)."""
    bounds = list(bounds)
    while 0 < len(bounds) < count:
        start, end = max(bounds, key=lambda b: b[1] - b[0])
        if end - start < 2:
            break
        middle = (start + end) // 2
        index = bounds.index((start, end))
        bounds[index : index + 1] = [(start, middle), (middle, end)]
    return bounds


# ----------------------------------------------------------------------------- the sampler
_TIE_STREAM = 1  # spawn key: the tie keys must not reuse the batch-order generator's seed words


class TokenBatchSampler(Sampler[list[int]]):
    """Yields lists of example indices whose padded size stays within ``max_tokens``.

    The padded size of a batch is ``len(batch) * max(lengths in batch)``. Examples are sorted
    by length and cut greedily into contiguous runs, so a batch holds examples of (nearly)
    equal length and padding is small. Each epoch breaks ties between equal lengths at random
    (so batch composition changes) and shuffles the batch order. The batch boundaries depend
    only on the sorted lengths, which makes the number of batches the same every epoch:
    Lightning reads ``len()`` once.

    Under DDP every rank derives the same global batch order from ``(seed, epoch)`` and takes
    every ``num_replicas``-th batch. For training (``shuffle``) the order is first padded by
    repeating its first batches to a multiple of ``num_replicas``, so ranks see disjoint
    batches (apart from the repeats) and exactly the same number of them: every update
    all-reduces gradients, and no rank may run out first. Validation needs no such lockstep,
    so its batches are not padded: every dev sentence counts exactly once over all ranks
    (one rank may then have a batch more than another).

    Memory per rank does not grow with the corpus (26M pairs and more), apart from ``order``:
    the sampler keeps the sorted lengths only as a run-length code (one entry per distinct
    length) and the batch boundaries as two arrays of positions in the sorted order (one entry
    per batch). A rank computes the members of its own batches only, one at a time as it
    iterates: the sorted positions of batch ``[s, e)`` within the group of length ``L_j`` map
    to examples ``order[G_j + perm_j(position - G_j)]``, where ``perm_j`` is a
    :func:`keyed_permutation` of the group keyed by ``(seed, epoch, j)``, so tie-breaking
    never shuffles all N indices. Without ``shuffle`` there is no permutation: ties keep their
    index order, shortest batches first.

    Args:
        lengths: Length of each example, see
            :func:`~seq2seq.data.batching.example_length`: a 1-D integer array-like, e.g. a
            read-only ``np.memmap``. Read once, while constructing; not kept.
        max_tokens: Padded-token budget per batch; every length must fit within it.
        shuffle: Randomise composition and order each epoch. Off (validation), batches run
            shortest first and are the same every epoch.
        seed: Base seed (non-negative); the epoch's order comes from ``(seed, epoch)`` only.
        num_replicas: Number of DDP processes.
        rank: This process's rank in ``[0, num_replicas)``.
        order: ``np.argsort(lengths, kind="stable")``, when the caller has it stored (e.g. a
            memmapped ``.npy`` that all ranks share); None computes it, which costs 8 bytes
            per example in this process.

    The state (:meth:`state_dict`) is the epoch and the number of batches this rank has
    yielded in it; after :meth:`load_state_dict` the next iteration skips those batches
    without computing them.
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        order: np.ndarray | None = None,
    ) -> None:
        lengths = np.asarray(lengths)  # a view of an array or memmap; lists are converted
        if lengths.dtype.kind not in "iu":
            lengths = lengths.astype(np.int64)
        values, counts = _length_counts(lengths)
        if len(values) and values[-1] > max_tokens:
            raise ValueError(
                f"an example of length {values[-1]} exceeds max_tokens={max_tokens}; "
                "raise max_tokens or drop longer examples"
            )
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} not in [0, {num_replicas})")
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self._values = values  # (K,) distinct lengths, ascending
        self._counts = counts  # (K,) examples of each length
        self._group_starts = np.cumsum(counts) - counts  # (K,) first sorted position of each
        self._order = self._checked_order(lengths, order)
        self._starts, self._ends = self._boundaries(num_replicas)  # (B,) each
        self._resume_from = 0  # batches to skip at the next __iter__ (set by load_state_dict)
        self._yielded = 0  # batches yielded in self.epoch so far

    def _checked_order(self, lengths: np.ndarray, order: np.ndarray | None) -> np.ndarray:
        """The stable argsort of ``lengths``: ``order`` after a cheap check, else computed."""
        if order is None:
            return np.argsort(lengths, kind="stable")
        order = np.asarray(order)
        if order.shape != lengths.shape:
            raise ValueError(f"order has shape {order.shape}, lengths {lengths.shape}")
        # Each group's first and last example must have the group's length: catches an order
        # stored for other data without reading all of it.
        firsts, lasts = self._group_starts, self._group_starts + self._counts - 1
        if len(firsts) and not (
            np.array_equal(lengths[order[firsts]], self._values)
            and np.array_equal(lengths[order[lasts]], self._values)
        ):
            raise ValueError("order does not sort lengths; expected argsort(lengths)")
        return order

    def _boundaries(self, num_replicas: int) -> tuple[np.ndarray, np.ndarray]:
        """Every batch's ``[start, end)`` in the sorted order, (B,) int64 each."""
        starts = _greedy_starts(self._values, self._counts, self.max_tokens)
        ends = np.append(starts[1:], len(self._order)).astype(np.int64)
        if not self.shuffle and 0 < len(starts) < num_replicas:
            # Unpadded: every rank must still get a batch to validate. Rare and tiny.
            bounds = _at_least(list(zip(starts.tolist(), ends.tolist(), strict=True)), num_replicas)
            starts, ends = (np.array(side, dtype=np.int64) for side in zip(*bounds, strict=True))
        return starts, ends

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch whose order the next iteration yields.

        Setting the epoch the sampler is already on keeps a pending resume position, because
        Lightning calls ``set_epoch`` right after restoring a mid-epoch state.
        """
        if epoch != self.epoch:
            self.epoch = epoch
            self._resume_from = 0
            self._yielded = 0

    @property
    def resume_position(self) -> int:
        """How many batches the next iteration skips (non-zero only after a restore)."""
        return self._resume_from

    def _batch_order(self, epoch: int) -> np.ndarray:
        """All ranks' batch numbers in ``epoch``'s order, before padding; (B,) int64."""
        if not self.shuffle:
            return np.arange(len(self._starts))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self._starts))

    def _rank_batch_order(self, epoch: int) -> np.ndarray:
        """This rank's batch numbers in ``epoch`` (training: padded by cycling from the start
        so that every rank has ``len(self)``); (len(self),) int64."""
        batches = self._batch_order(epoch)
        if self.shuffle and len(batches):
            batches = batches[np.arange(len(self) * self.num_replicas) % len(batches)]
        return batches[self.rank :: self.num_replicas]

    def _group_keys(self, epoch: int) -> np.ndarray | None:
        """One permutation key per length group for ``epoch``, (K,) uint64; None unshuffled."""
        if not self.shuffle:
            return None
        return permutation_keys([self.seed, epoch], len(self._values), _TIE_STREAM)

    def _members(self, batch: int, keys: np.ndarray | None) -> np.ndarray:
        """Example indices of batch number ``batch``, shortest first; (size,) int64."""
        start, end = int(self._starts[batch]), int(self._ends[batch])
        if keys is None:
            return np.asarray(self._order[start:end], dtype=np.int64)
        positions = []
        group = int(np.searchsorted(self._group_starts, start, side="right")) - 1
        while group < len(self._values) and self._group_starts[group] < end:
            first, size = int(self._group_starts[group]), int(self._counts[group])
            offsets = np.arange(max(start, first), min(end, first + size)) - first
            positions.append(first + keyed_permutation(offsets, size, keys[group]))
            group += 1
        return np.asarray(self._order[np.concatenate(positions)], dtype=np.int64)

    def global_batches(self, epoch: int | None = None) -> list[list[int]]:
        """All ranks' batches for ``epoch`` (default: the current one), before padding.

        Materialises every index: for tests and small data."""
        epoch = self.epoch if epoch is None else epoch
        keys = self._group_keys(epoch)
        return [self._members(b, keys).tolist() for b in self._batch_order(epoch).tolist()]

    def rank_batches(self, epoch: int | None = None) -> list[list[int]]:
        """This rank's batches for ``epoch`` (training: padded so every rank has as many)."""
        epoch = self.epoch if epoch is None else epoch
        keys = self._group_keys(epoch)
        return [self._members(b, keys).tolist() for b in self._rank_batch_order(epoch).tolist()]

    def __len__(self) -> int:
        if not self.shuffle:  # unpadded: the batches rank, rank + N, rank + 2N, ...
            return len(range(self.rank, len(self._starts), self.num_replicas))
        return math.ceil(len(self._starts) / self.num_replicas)

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._rank_batch_order(self.epoch)
        keys = self._group_keys(self.epoch)
        start, self._resume_from = self._resume_from, 0
        self._yielded = start
        for batch in batches[start:].tolist():
            # Count before yielding: the consumer holds this batch when it next saves state.
            self._yielded += 1
            yield self._members(batch, keys).tolist()

    def state_dict(self) -> dict[str, int]:
        """``{"epoch", "batches_yielded"}``; restore with :meth:`load_state_dict`."""
        return {"epoch": self.epoch, "batches_yielded": self._yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continues epoch ``state["epoch"]`` after its first ``batches_yielded`` batches."""
        self.epoch = int(state["epoch"])
        self._resume_from = self._yielded = int(state["batches_yielded"])

    def padding_fraction(self, epoch: int | None = None) -> float:
        """Fraction of padded positions over all (unpadded) global batches.

        The same every epoch, as ties do not change a batch's lengths; ``epoch`` is accepted
        for symmetry with :meth:`global_batches`. Computed from the run-length code without
        building any batch: the real tokens of batch ``[s, e)`` are a range sum of the sorted
        lengths and its padded size is ``(e - s)`` times the length at ``e - 1``.
        """
        if not len(self._starts):
            return 0.0
        padded = (self._ends - self._starts) * self._sorted_length_at(self._ends - 1)
        real = self._tokens_before(self._ends) - self._tokens_before(self._starts)
        return 1.0 - int(real.sum()) / int(padded.sum()) if padded.sum() else 0.0

    def _group_of(self, positions: np.ndarray) -> np.ndarray:
        """Length group holding each sorted position; (M,) -> (M,)."""
        return np.searchsorted(self._group_starts, positions, side="right") - 1

    def _sorted_length_at(self, positions: np.ndarray) -> np.ndarray:
        """The ascending lengths at ``positions``; (M,) -> (M,)."""
        return self._values[self._group_of(positions)]

    def _tokens_before(self, positions: np.ndarray) -> np.ndarray:
        """Sum of the ascending lengths before each position in ``[0, N]``; (M,) -> (M,)."""
        group = self._group_of(positions)
        tokens_before_group = np.cumsum(self._values * self._counts) - self._values * self._counts
        offset = positions - self._group_starts[group]
        return tokens_before_group[group] + offset * self._values[group]


def padding_fraction(batches: Sequence[Sequence[int]], lengths: Sequence[int]) -> float:
    """Fraction of positions in ``batches`` that are padding, given per-example ``lengths``.

    Each batch costs ``len(batch) * max(length)`` positions of which ``sum(length)`` are real.
    """
    lengths = np.asarray(lengths)
    real = padded = 0
    for batch in batches:
        batch_lengths = lengths[np.asarray(batch, dtype=np.int64)]
        real += int(batch_lengths.sum())
        padded += len(batch) * int(batch_lengths.max(initial=0))
    return 1.0 - real / padded if padded else 0.0
