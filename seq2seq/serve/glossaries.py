"""The server's glossaries (DeepL's ``/v2/glossaries``): kept in memory, and with a directory
also one JSON file each, so that they outlive a restart. No HTTP here.

A file is written whole to a temporary file in the same directory and renamed over the old
one (``os.replace``), so a crash leaves the old file or the new one, never half of one; the
directory is read when the store is made, and a file that cannot be read back is skipped with
a warning (a server never fails to start over one bad glossary).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from seq2seq.errors import ConfigError, DataError
from seq2seq.inference.glossary import Glossary, Term

log = logging.getLogger("seq2seq.serve")
MAX_GLOSSARIES = 1000  # DeepL's per-account limit
MAX_ENTRIES = 10_000  # terms of one glossary: each is looked up in every sentence
MAX_ENTRIES_BYTES = 1_000_000  # the entries text, UTF-8 (DeepL allows 10 MiB)
MAX_NAME_BYTES = 1024  # a name or a term, UTF-8 (DeepL's limit)


class StoreFull(Exception):
    """The store holds ``MAX_GLOSSARIES`` glossaries already."""


@dataclass(frozen=True)
class StoredGlossary:
    """One glossary as the API shows it: its id, name, languages (lower-case codes), creation
    time (UTC) and terms."""

    glossary_id: str
    name: str
    created: datetime
    glossary: Glossary
    source_lang: str = "en"
    target_lang: str = "zh"

    @property
    def creation_time(self) -> str:
        """ISO 8601 in UTC with milliseconds and a ``Z``, as DeepL writes it."""
        return self.created.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    def to_json(self) -> dict:
        return {
            "id": self.glossary_id,
            "name": self.name,
            "source_lang": self.source_lang,
            "target_lang": self.target_lang,
            "creation_time": self.creation_time,
            "entries": self.glossary.to_tsv(),
        }

    @classmethod
    def from_json(cls, data: dict, source: str) -> StoredGlossary:
        """Raises:
        DataError: a field missing or of the wrong type, a bad id or time, or a bad entry.
        """
        fields = ("id", "name", "source_lang", "target_lang", "creation_time", "entries")
        if not isinstance(data, dict) or not all(isinstance(data.get(f), str) for f in fields):
            raise DataError.at(
                source, None, f"expected an object with the string fields {', '.join(fields)}"
            )
        try:
            glossary_id = str(uuid.UUID(data["id"]))
            created = datetime.fromisoformat(data["creation_time"].replace("Z", "+00:00"))
        except ValueError as error:
            raise DataError.at(source, None, f"bad id or creation_time ({error})") from None
        glossary = Glossary.parse(data["entries"], source, "tsv")
        return cls(
            glossary_id, data["name"], created, glossary, data["source_lang"], data["target_lang"]
        )


class GlossaryStore:
    """Glossaries by id; thread-safe. ``directory`` None: in memory only.

    Raises:
        ConfigError: ``directory`` cannot be created.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self._lock = threading.Lock()
        self._glossaries: dict[str, StoredGlossary] = {}
        if self.directory is not None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise ConfigError(
                    f"glossary directory {self.directory}: cannot create it "
                    f"({error.strerror or error})"
                ) from None
            for stored in _load(self.directory):
                self._glossaries[stored.glossary_id] = stored

    def __len__(self) -> int:
        return len(self._glossaries)

    def create(
        self, name: str, glossary: Glossary, source_lang: str = "en", target_lang: str = "zh"
    ) -> StoredGlossary:
        """A new glossary with a fresh id (a UUID, as DeepL's), saved before it is listed.

        Raises:
            StoreFull: ``MAX_GLOSSARIES`` are stored already.
        """
        stored = StoredGlossary(
            str(uuid.uuid4()), name, datetime.now(timezone.utc), glossary, source_lang, target_lang
        )
        with self._lock:
            if len(self._glossaries) >= MAX_GLOSSARIES:
                raise StoreFull(
                    f"the server holds {MAX_GLOSSARIES} glossaries, its limit: delete one first"
                )
            self._save(stored)
            self._glossaries[stored.glossary_id] = stored
        return stored

    def get(self, glossary_id: str) -> StoredGlossary | None:
        with self._lock:
            return self._glossaries.get(glossary_id)

    def list(self) -> list[StoredGlossary]:
        """Every glossary, oldest first."""
        with self._lock:
            return sorted(self._glossaries.values(), key=lambda g: g.created)

    def update(
        self, glossary_id: str, name: str | None = None, glossary: Glossary | None = None
    ) -> StoredGlossary | None:
        """The glossary renamed or its terms replaced (saved first); None if there is none."""
        with self._lock:
            stored = self._glossaries.get(glossary_id)
            if stored is None:
                return None
            if name is not None:
                stored = replace(stored, name=name)
            if glossary is not None:
                stored = replace(stored, glossary=glossary)
            self._save(stored)
            self._glossaries[glossary_id] = stored
            return stored

    def delete(self, glossary_id: str) -> bool:
        """Forget the glossary and remove its file; False if there was none."""
        with self._lock:
            if self._glossaries.pop(glossary_id, None) is None:
                return False
            if self.directory is not None:
                (self.directory / f"{glossary_id}.json").unlink(missing_ok=True)
            return True

    def _save(self, stored: StoredGlossary) -> None:
        if self.directory is None:
            return
        text = json.dumps(stored.to_json(), ensure_ascii=False, indent=1)
        _write_atomically(self.directory / f"{stored.glossary_id}.json", text)


def _write_atomically(path: Path, text: str) -> None:
    """``text`` in ``path``, all or nothing: a temporary file beside it, synced, renamed."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _load(directory: Path) -> list[StoredGlossary]:
    """The glossaries saved in ``directory``; each unreadable file skipped with a warning."""
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stored = StoredGlossary.from_json(data, str(path))
            if stored.glossary_id != path.stem:
                raise DataError.at(
                    path, None, f"holds glossary {stored.glossary_id}, not {path.stem}"
                )
        except (OSError, UnicodeDecodeError, ValueError, DataError) as error:
            log.warning("skipping glossary file %s: %s", path, error)
            continue
        found.append(stored)
    if found:
        log.info("loaded %d glossaries from %s", len(found), directory)
    return found


def merged(old: Glossary, new: Glossary) -> Glossary:
    """``old``'s terms with ``new``'s added, a new term replacing an old one of the same words
    (each occurs whole in the other), as DeepL's ``PATCH /v3/glossaries`` merges entries."""

    def replaced(term: Term) -> bool:
        alone = Glossary([term])
        return any(alone.terms_in(other.source) == [term] for other in new.terms_in(term.source))

    return Glossary([*(term for term in old if not replaced(term)), *new])
