"""Arrow tables for preparation: a corpus on disk, memory-mapped, processed by several processes.

A corpus of tens of millions of pairs does not fit in Python objects (a pair as two ``str`` and
a tuple costs ~300 bytes; its token ids as Python lists ~2 KB). Preparation therefore writes the
corpus once into an Arrow file and works on it with ``datasets``: a :class:`datasets.Dataset`
over an Arrow file is memory-mapped (the operating system pages it in and out; nothing is
copied into the process), and ``Dataset.map(batched=True, num_proc=N)`` runs a function over
contiguous shards in N worker processes, each writing its own Arrow file. What stays in the
preparing process are numpy arrays of a few bytes per pair (hash keys, codes, lengths).

The prepared token ids leave Arrow as flat ``.npy`` files (:func:`write_token_arrays`), which
every training process maps with ``np.load(mmap_mode="r")``: one copy in the page cache per
machine, however many ranks read it. Nothing here imports Lightning.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

ROWS_PER_PROCESS = 20_000  # fewer rows than this per worker: starting workers costs more


def default_num_proc() -> int:
    """The cores this process may run on (its CPU affinity, as a container or ``taskset`` sets)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """Shows ``datasets``' progress bars (one per step, on stderr) while the block runs, or hides
    them; restores the previous setting after."""
    from datasets.utils import logging as datasets_logging

    was_enabled = datasets_logging.is_progress_bar_enabled()
    if enabled:
        datasets_logging.enable_progress_bar()
    else:
        datasets_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            datasets_logging.enable_progress_bar()
        else:
            datasets_logging.disable_progress_bar()


def write_table(batches: Iterable[dict[str, list]], path: Path, features: Any, desc: str):  # noqa: ANN201
    """Writes column batches into a new Arrow file at ``path`` and returns it as a memory-mapped
    ``datasets.Dataset``; a progress bar counts the rows as they are read."""
    import datasets
    from datasets.arrow_writer import ArrowWriter
    from datasets.utils import tqdm

    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        ArrowWriter(features=features, path=str(path)) as writer,
        tqdm(desc=desc, unit=" rows") as bar,
    ):
        for batch in batches:
            writer.write_batch(batch)
            bar.update(len(next(iter(batch.values()))))
        writer.finalize()
    return datasets.Dataset.from_file(str(path))


def parallel_map(  # noqa: ANN201 (datasets.Dataset)
    dataset: Any,
    function: Callable[..., dict[str, list]],
    path: Path,
    desc: str,
    num_proc: int,
    features: Any = None,
    fn_kwargs: dict[str, Any] | None = None,
    input_columns: list[str] | None = None,
    batch_size: int = 1000,
    with_indices: bool = False,
):
    """``dataset.map(function, batched=True)`` into Arrow files named after ``path``, in up to
    ``num_proc`` processes (fewer for a small table), replacing every column by ``function``'s.

    The output's rows follow the input's (each worker takes a contiguous shard), so the result
    is the same for any ``num_proc``. ``function`` must be picklable: workers receive it. With
    ``input_columns`` it gets those columns' lists as arguments (and the workers page in only
    those columns of the memory-mapped table), else the whole batch as a dict.
    """
    procs = max(1, min(num_proc, math.ceil(len(dataset) / ROWS_PER_PROCESS)))
    return dataset.map(
        function,
        batched=True,
        batch_size=batch_size,
        input_columns=input_columns,
        with_indices=with_indices,
        fn_kwargs=fn_kwargs,
        remove_columns=dataset.column_names,
        features=features,
        num_proc=procs if procs > 1 else None,
        cache_file_name=str(path),
        load_from_cache_file=False,
        new_fingerprint=path.stem,  # not a hash of ``function``: the file is ours, used once
        desc=desc,
    )


def record_batches(dataset: Any, columns: list[str]) -> Iterator[Any]:
    """The rows of a ``datasets.Dataset`` (no indices mapping), in order, as pyarrow record
    batches of ``columns``, read from its Arrow files with ordinary reads.

    Not through the memory map: pages read through a map stay in the process's resident set
    (and its proportional memory) for as long as the table lives, so a pass over a big table
    would leave all of it counted against the preparing process. Read like this, each batch is
    freed once used, and the pages stay in the page cache only.
    """
    import pyarrow as pa

    for cache_file in dataset.cache_files:  # a map's shards, in row order
        with pa.OSFile(cache_file["filename"]) as file:
            for batch in pa.ipc.open_stream(file):
                yield batch.select(columns)


def column(dataset: Any, name: str) -> np.ndarray:
    """A scalar column as one numpy array (see :func:`record_batches`)."""
    return np.concatenate([_owned(batch.column(0)) for batch in record_batches(dataset, [name])])


def list_lengths(dataset: Any, name: str) -> np.ndarray:
    """(N,) int64 length of each row's list in column ``name`` (see :func:`record_batches`)."""
    import pyarrow.compute as pc

    parts = [
        _owned(pc.list_value_length(batch.column(0))) for batch in record_batches(dataset, [name])
    ]
    return np.concatenate(parts).astype(np.int64)


def flat_values(dataset: Any, name: str) -> np.ndarray:
    """All rows' lists of column ``name`` one after the other, as one numpy array."""
    parts = [_owned(batch.column(0).flatten()) for batch in record_batches(dataset, [name])]
    return np.concatenate(parts)


def _owned(array: Any) -> np.ndarray:
    """A numpy copy of a pyarrow array. A zero-copy view would keep the whole record batch it
    was read with (every column, the text too) alive until the view is gone."""
    return np.array(array.to_numpy(zero_copy_only=False), copy=True)


def text_rows(dataset: Any, columns: list[str], rows: np.ndarray) -> dict[str, list[str]]:
    """The values of ``columns`` in ``rows`` (ascending indices), read in one streamed pass."""
    out: dict[str, list[str]] = {name: [] for name in columns}
    start = 0
    for batch in record_batches(dataset, columns):
        end = start + batch.num_rows
        wanted = rows[np.searchsorted(rows, start) : np.searchsorted(rows, end)] - start
        if len(wanted):
            taken = batch.take(wanted)
            for name in columns:
                out[name] += taken.column(name).to_pylist()
        start = end
    return out


class NpyWriter:
    """Writes a 1-D ``.npy`` file of known length in pieces (``np.save`` needs it all at once),
    through the file, never a memory map (the pages need not be resident, or counted, here)."""

    def __init__(self, path: Path, dtype: Any, length: int) -> None:
        self.path, self.dtype, self.length, self.written = path, np.dtype(dtype), length, 0
        self._file = open(path, "wb")  # noqa: SIM115 (closed in __exit__)
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": (length,),
        }
        np.lib.format.write_array_header_2_0(self._file, header)

    def write(self, values: np.ndarray) -> None:
        """Appends ``values`` (converted to the file's dtype)."""
        self._file.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        self.written += len(values)

    def close(self) -> None:
        """Closes the file; raises ValueError if the pieces did not add up to ``length``."""
        self._file.close()
        if self.written != self.length:
            raise ValueError(f"{self.path}: wrote {self.written} values, expected {self.length}")


def smallest_int_dtype(largest: int) -> np.dtype:
    """uint16 for ids below 65,536 (every vocabulary we train), int32 beyond: half the disk and
    page cache for the ids of a normal vocabulary."""
    return np.dtype(np.uint16) if largest < 2**16 else np.dtype(np.int32)


def index_dtype(count: int) -> np.dtype:
    """int32 to index up to 2**31 - 1 items, int64 beyond."""
    return np.dtype(np.int32) if count < 2**31 else np.dtype(np.int64)
