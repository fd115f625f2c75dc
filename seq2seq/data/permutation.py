"""Keyed pseudo-random permutations, evaluated only where asked: how the batch sampler
(:mod:`seq2seq.data.sampler`) breaks ties between equal lengths each epoch without ever
shuffling all N indices; and keyed uniform draws per row (:func:`uniforms`), what the data
modifiers (:mod:`seq2seq.data.modifiers`) decide each pair's changes with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # splitmix64's increment
_FEISTEL_ROUNDS = 6  # 4 suffice balanced (Luby-Rackoff); ours is unbalanced, so a margin


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a fast bijection on uint64 whose output bits all depend on every
    input bit. ``x`` is a uint64 array (array arithmetic wraps modulo 2**64 without a warning)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _feistel(x: np.ndarray, round_keys: np.ndarray, bits: int) -> np.ndarray:
    """One pass of an unbalanced Feistel network: a bijection on ``[0, 2**bits)``.

    Each round replaces the high part by itself xor a keyed hash of the low part, which is
    invertible whatever the hash, then swaps the parts (so their widths alternate). Splitting
    unevenly lets ``2**bits`` be the smallest power of two that holds the range.
    """
    high_bits, low_bits = (bits + 1) // 2, bits // 2
    high, low = x >> np.uint64(low_bits), x & np.uint64((1 << low_bits) - 1)
    for round_key in round_keys:
        mixed = high ^ (_mix64(low ^ round_key) & np.uint64((1 << high_bits) - 1))
        high, low, high_bits, low_bits = low, mixed, low_bits, high_bits
    return (high << np.uint64(low_bits)) | low


def keyed_permutation(positions: np.ndarray, size: int, key: int) -> np.ndarray:
    """Images of ``positions`` under a pseudo-random permutation of ``[0, size)`` chosen by ``key``.

    Evaluates the permutation only where asked, so a batch of ``m`` tied examples costs O(m),
    not O(size): a Feistel network on the smallest ``[0, 2**bits)`` that holds ``size``
    values, with cycle walking (apply it again while the image is ``>= size``, which ends
    because the cycle through a position in range returns to the range; more than half the
    values are in range, so few passes are needed). Different keys give unrelated permutations.

    Args:
        positions: Integers in ``[0, size)``.
        size: Size of the permuted range.
        key: Any integer in ``[0, 2**64)``.

    Shape:
        positions: (M,); returns (M,) int64, distinct where ``positions`` are.
    """
    bits = max(2, int(size - 1).bit_length())  # two bits at least: both parts non-empty
    steps = _GOLDEN * np.arange(1, _FEISTEL_ROUNDS + 1, dtype=np.uint64)
    round_keys = _mix64(np.uint64(key) + steps)
    images = np.asarray(positions, dtype=np.uint64)
    out = np.empty(len(images), dtype=np.int64)
    pending = np.arange(len(images))
    while len(pending):
        images = _feistel(images, round_keys, bits)
        landed = images < np.uint64(size)
        out[pending[landed]] = images[landed]
        pending, images = pending[~landed], images[~landed]
    return out


def permutation_keys(seed: Sequence[int], count: int, stream: int) -> np.ndarray:
    """``count`` keys for :func:`keyed_permutation`, (count,) uint64, chosen by ``seed``.

    A base drawn from ``SeedSequence(seed, spawn_key=(stream,))`` (``stream``: so that the keys
    never reuse the seed words of another generator), then splitmix64's stream: base + i *
    golden, mixed.
    """
    entropy = np.random.SeedSequence(list(seed), spawn_key=(stream,))
    base = entropy.generate_state(1, np.uint64)[0]
    return _mix64(base + _GOLDEN * np.arange(1, count + 1, dtype=np.uint64))


def uniforms(seed: int, rows: np.ndarray, salt: int) -> np.ndarray:
    """(N,) floats in [0, 1), one per row: :func:`_mix64` of (seed, salt, row), so a row's draw
    depends on nothing else (not the process, the batch or the order rows are read in)."""
    start = (seed * 0x9E3779B97F4A7C15 + salt * 0xD1B54A32D192ED03) & ((1 << 64) - 1)
    x = np.asarray(rows, dtype=np.uint64) * np.uint64(0xBF58476D1CE4E5B9) + np.uint64(start)
    return (_mix64(x) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
