"""Where a checkpoint's data was found, recorded at training and looked for again later.

The data module records, in its hyperparameters (so in every checkpoint), the absolute paths of
the prepared cache and of the corpus files (``recorded_location``). ``evaluate --split`` run from
any directory then finds the same data: the cache where training left it (``recorded_cache``),
else the corpus files, to prepare again (``corpus_files``); what is in neither place is named
in one error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seq2seq.data.cache_dir import is_prepared
from seq2seq.data.sources import CorpusSpec
from seq2seq.errors import DataError

# The hyperparameter that records where the data was found, as absolute paths: the cache
# (``cache_dir`` and ``cache_name``) and the corpus's ``CORPUS_FILES`` (None where not a local
# file or directory). Not a constructor argument: Lightning's loaders and ``trained_with`` keep
# only those. Checkpoints saved before it existed have only the paths as given to ``fit``.
DATA_LOCATION = "data_location"
CORPUS_FILES = ("path", "tgt_path", "hf_name")


def recorded_location(cache: Path, spec: CorpusSpec) -> dict[str, str | None]:
    """The ``DATA_LOCATION`` entry for data read from ``cache``, prepared from ``spec``.

    Absolute, as the paths given may be relative to the directory training ran in. Paths only:
    the corpus itself stays out of checkpoints.
    """
    cache = cache.resolve()
    files = {field: absolute_path(getattr(spec, field)) for field in CORPUS_FILES}
    return {"cache_dir": str(cache.parent), "cache_name": cache.name, **files}


def absolute_path(path: str | None) -> str | None:
    """``path`` resolved, if it names a local file or directory (a hub name does not)."""
    return str(Path(path).resolve()) if path is not None and Path(path).exists() else None


def recorded_cache(location: dict[str, Any], cache_dir: str) -> Path | None:
    """The prepared cache that training used: in its recorded directory, or under ``cache_dir``
    from here; None if neither holds it (or nothing was recorded)."""
    name = location.get("cache_name")
    for directory in (location.get("cache_dir"), cache_dir):
        if name and directory and is_prepared(Path(directory) / name):
            return Path(directory) / name
    return None


def corpus_files(
    settings: dict[str, Any], location: dict[str, Any], checkpoint: str | Path
) -> dict[str, str]:
    """Each corpus file or directory where training read it (absolute), else as given from here.

    Raises:
        DataError: one is in neither place; the message names every place looked at.
    """
    found, missing = {}, []
    for field in CORPUS_FILES:
        given, recorded = settings.get(field), location.get(field)
        if field == "hf_name" and recorded is None:
            continue  # a hub name, or a checkpoint older than DATA_LOCATION: as given
        candidates = list(dict.fromkeys(path for path in (recorded, given) if path))
        if given is not None and absolute_path(given) == recorded:
            candidates = [given]  # the same file: as given, it keeps the cache name fit gives
        hit = next((path for path in candidates if Path(path).exists()), None)
        if hit is not None:
            found[field] = hit
        else:
            missing += [
                path if Path(path).is_absolute() else f"{path} in {Path.cwd()}"
                for path in candidates
            ]
    if missing:
        raise _data_not_found(checkpoint, location, missing)
    return found


def _data_not_found(
    checkpoint: str | Path, location: dict[str, Any], missing: list[str]
) -> DataError:
    looked = [f"no {path}" for path in missing]
    if location.get("cache_name"):
        looked.insert(0, f"no cache {Path(location['cache_dir']) / location['cache_name']}")
    return DataError(f"{checkpoint}: the data it was trained on is not here ({', '.join(looked)})")
