"""The documents DeepL's document API holds (``deepl_documents``): each translated in the
background, at most ``TRANSLATING_AT_ONCE`` at a time (the others ``queued``), kept in memory
until it is downloaded, within ``MAX_DOCUMENTS`` documents and ``MAX_BYTES`` bytes; a finished
one is dropped ``EXPIRY_S`` seconds after its translation ended."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

from seq2seq.inference.options import TranslateOptions
from seq2seq.serve.deepl_translate import Usage
from seq2seq.serve.files import TranslateTexts
from seq2seq.serve.protocol import ApiError

log = logging.getLogger("seq2seq.serve")

MAX_DOCUMENTS = 100  # held at once, waiting, translating or translated
MAX_BYTES = 256 * 2**20  # their uploads (until translated) and translations, together
EXPIRY_S = 3600.0  # a translation not downloaded within the hour is dropped
TRANSLATING_AT_ONCE = 2  # their sentences share the worker's batches; the others wait
# A document's sentences are refused by a full worker queue (--max-queue) as a request's are;
# no client waits on it, so it is tried again, every BUSY_RETRY_S for BUSY_FOR_S at most.
BUSY_RETRY_S = 0.5
BUSY_FOR_S = 600.0


@dataclass(eq=False)
class KeptDocument:
    """One uploaded document: what its translation needs until it is made, then the file."""

    name: str
    text_format: str
    options: TranslateOptions
    texts: list | None  # what translate_texts takes: the text, or a zipped file's parts
    write: Callable[[list[str]], bytes] | None  # the translated file from the texts translated
    characters: int  # of its text to translate: billed_characters
    size: int  # bytes held: the upload's until it is translated, then the translation's
    key: str = ""
    status: str = "queued"  # then translating, then done or error
    body: bytes | None = None
    error: str | None = None
    started: float = 0.0
    finished: float = 0.0
    task: asyncio.Task | None = None


class _Detached:
    """What ``translate_texts`` asks of a request, for a translation no client waits on: it
    never disconnects (the document is kept until it is downloaded or expires)."""

    def __init__(self) -> None:
        self.state = SimpleNamespace()

    async def is_disconnected(self) -> bool:
        return False


class DocumentStore:
    """The documents under their ids, oldest first, and their background translations."""

    def __init__(self, translate_texts: TranslateTexts, usage: Usage) -> None:
        self.translate_texts = translate_texts
        self.usage = usage
        self.documents: OrderedDict[str, KeptDocument] = OrderedDict()
        self.slots = asyncio.Semaphore(TRANSLATING_AT_ONCE)  # bound to a loop on first use
        self.characters_per_second: float | None = None  # of the last document translated

    def add(self, document: KeptDocument) -> tuple[str, str]:
        """Keep ``document`` and start its translation: its id and key (DeepL's lengths)."""
        self._make_room(document.size)
        document_id = secrets.token_hex(16).upper()
        document.key = secrets.token_hex(32).upper()
        self.documents[document_id] = document
        document.task = asyncio.create_task(self._translate(document))
        return document_id, document.key

    def get(self, document_id: str) -> KeptDocument:
        """The document of ``document_id``; a 404 when there is none (any more)."""
        self._expire()
        document = self.documents.get(document_id)
        if document is None:
            raise ApiError(
                404,
                "Document not found: no document has this document_id, or its translation "
                f"was downloaded already (once only) or expired ({EXPIRY_S / 60:.0f} minutes "
                "after it was done)",
            )
        return document

    def remove(self, document_id: str) -> None:
        """Drop the document, stopping its translation if it has not ended."""
        document = self.documents.pop(document_id, None)
        if document is not None and document.task is not None:
            document.task.cancel()

    def seconds_remaining(self, document: KeptDocument) -> int | None:
        """At the last document's pace; None before any document has been timed."""
        if not self.characters_per_second:
            return None
        spent = time.monotonic() - document.started
        return max(1, round(document.characters / self.characters_per_second - spent))

    def _make_room(self, size: int) -> None:
        """Room for a document of ``size`` bytes: the expired dropped, then the oldest
        finished; a 429 when the documents still waiting or translating fill the store."""
        if size > MAX_BYTES:
            raise ApiError(413, f"Document too large: {size} bytes (at most {MAX_BYTES})")
        self._expire()
        finished = [i for i, d in self.documents.items() if d.status in ("done", "error")]
        while self._over(size) and finished:
            self.remove(finished.pop(0))
        if self._over(size):
            raise ApiError(
                429,
                f"Too many documents in translation ({len(self.documents)}, "
                f"{self._held() / 2**20:.0f} MiB): upload again once some are done",
            )

    def _over(self, size: int) -> bool:
        return len(self.documents) >= MAX_DOCUMENTS or self._held() + size > MAX_BYTES

    def _held(self) -> int:
        return sum(document.size for document in self.documents.values())

    def _expire(self) -> None:
        now = time.monotonic()
        expired = [
            document_id
            for document_id, document in self.documents.items()
            if document.finished and now - document.finished > EXPIRY_S
        ]
        for document_id in expired:
            self.remove(document_id)

    async def _translate(self, document: KeptDocument) -> None:
        """The background task: queued until a slot is free, then translated, done or error."""
        async with self.slots:
            document.status, document.started = "translating", time.monotonic()
            try:
                body = await self._translated(document)
            except ApiError as error:
                document.status, document.error = "error", error.message
            except Exception as error:  # never lost in a task nobody awaits: said in the status
                log.exception("document %s failed", document.name)
                document.status, document.error = "error", f"{type(error).__name__}: {error}"
            else:
                document.status, document.body, document.size = "done", body, len(body)
                self.usage.characters += document.characters
                self._time(document)
            document.finished = time.monotonic()
            document.texts = document.write = None  # the upload is no longer needed
            if document.body is None:
                document.size = 0

    async def _translated(self, document: KeptDocument) -> bytes:
        """The translated file; tried again while the worker's queue is full."""
        assert document.texts is not None and document.write is not None
        deadline = time.monotonic() + BUSY_FOR_S
        while True:
            try:
                results = await self.translate_texts(_Detached(), document.texts, document.options)
                break
            except ApiError as error:
                if error.status != 429 or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(BUSY_RETRY_S)
        return await asyncio.to_thread(document.write, [result.text for result in results])

    def _time(self, document: KeptDocument) -> None:
        spent = time.monotonic() - document.started
        if document.characters and spent > 0:
            self.characters_per_second = document.characters / spent
