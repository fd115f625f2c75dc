"""A split of translation pairs as token ids in flat arrays, usually memory-mapped from a
preparation's cache (written by :func:`seq2seq.data.pair_pipeline.prepare_pairs`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class TokenizedPairs:
    """Token-id pairs stored as flat arrays; ``self[i]`` is ``(src_ids, tgt_ids)``.

    The arrays (``src``/``tgt`` ids, their ``*_offsets``, optionally each pair's batching cost
    ``lengths`` and their stable ``order``) are usually read-only memory maps of a cache
    directory (:meth:`load`): every process of a machine reads the same pages, and forked
    ``DataLoader`` workers share them too.
    """

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self._ids = {side: arrays[side] for side in ("src", "tgt")}
        self._offsets = {side: arrays[f"{side}_offsets"] for side in ("src", "tgt")}
        self.stored_lengths = arrays.get("lengths")
        self.stored_order = arrays.get("order")

    @classmethod
    def load(cls, directory: Path) -> TokenizedPairs:
        """Maps a split's arrays (written by
        :func:`~seq2seq.data.pair_pipeline.prepare_pairs`) without reading them."""
        names = ("src", "tgt", "src_offsets", "tgt_offsets", "lengths", "order")
        return cls({name: np.load(directory / f"{name}.npy", mmap_mode="r") for name in names})

    @classmethod
    def from_lists(cls, src: list[list[int]], tgt: list[list[int]]) -> TokenizedPairs:
        """Packs per-sentence id lists (in memory; for tests and small data)."""
        arrays = {}
        for side, seqs in (("src", src), ("tgt", tgt)):
            lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
            arrays[f"{side}_offsets"] = np.concatenate([[0], np.cumsum(lengths)])
            flat = [token for seq in seqs for token in seq]
            arrays[side] = np.asarray(flat, dtype=np.int32)
        return cls(arrays)

    def side_lengths(self, side: str) -> np.ndarray:
        """Token count of every sentence of ``side`` (``"src"`` or ``"tgt"``)."""
        return np.diff(self._offsets[side])

    def lengths(self) -> np.ndarray:
        """:func:`~seq2seq.data.batching.example_length` of every pair, for the batch sampler."""
        return np.maximum(self.side_lengths("src"), self.side_lengths("tgt")) + 1

    def _side(self, side: str, i: int) -> list[int]:
        start, end = self._offsets[side][i], self._offsets[side][i + 1]
        return self._ids[side][start:end].tolist()

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self._side("src", i), self._side("tgt", i)

    def __len__(self) -> int:
        return len(self._offsets["src"]) - 1
