"""The documents DeepL's document API holds, without HTTP or a model: translated in the
background at most two at a time (the others queued), tried again while the worker's queue is
full, dropped once expired or to make room (the oldest finished first), and a 429 when the
documents still to translate fill the store."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")

from seq2seq.inference.options import TranslateOptions  # noqa: E402
from seq2seq.serve import document_store  # noqa: E402
from seq2seq.serve.deepl_translate import Usage  # noqa: E402
from seq2seq.serve.document_store import DocumentStore, KeptDocument  # noqa: E402
from seq2seq.serve.protocol import ApiError  # noqa: E402


class Translations:
    """A stand-in for ``translate_texts``: each text upper-cased once ``release`` is set;
    the first ``busy`` calls answer 429 as a full worker queue does."""

    def __init__(self, busy: int = 0) -> None:
        self.release = asyncio.Event()
        self.busy = busy
        self.running = 0
        self.most_running = 0

    async def __call__(self, request, texts, options):
        assert not await request.is_disconnected()
        if self.busy:
            self.busy -= 1
            raise ApiError(429, "queue full")
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        await self.release.wait()
        self.running -= 1
        return [SimpleNamespace(text=text.upper()) for text in texts]


def answering_store(busy: int = 0) -> tuple[Translations, DocumentStore]:
    """A store whose translations answer at once (after ``busy`` answers of 429)."""
    translations = Translations(busy)
    translations.release.set()
    return translations, DocumentStore(translations, Usage())


def document(text: str, size: int = 10) -> KeptDocument:
    def write(translated: list[str]) -> bytes:
        return translated[0].encode()

    return KeptDocument("a.txt", "text", TranslateOptions(), [text], write, len(text), size)


async def settled(store: DocumentStore) -> None:
    """Until every task has ended, or none has moved for 0.2 s (some wait on purpose)."""

    def state():
        return [(d.status, d.body) for d in store.documents.values()]

    last, still = state(), 0
    for _ in range(500):
        await asyncio.sleep(0.01)
        if all(d.task.done() for d in store.documents.values()):
            return
        still = still + 1 if state() == last else 0
        last = state()
        if still >= 20:
            return


def test_two_translate_at_once_the_others_wait_queued():
    async def scenario():
        translations, usage = Translations(), Usage()
        store = DocumentStore(translations, usage)
        ids = [store.add(document(f"text {n}"))[0] for n in range(3)]
        await settled(store)
        assert [store.get(i).status for i in ids] == ["translating", "translating", "queued"]
        translations.release.set()
        await settled(store)
        assert [store.get(i).body for i in ids] == [b"TEXT 0", b"TEXT 1", b"TEXT 2"]
        assert {store.get(i).status for i in ids} == {"done"} and translations.most_running == 2
        assert usage.characters == 18 and store.get(ids[0]).size == 6  # the translation's bytes
        assert store.seconds_remaining(document("x" * 100)) >= 1  # at the pace measured

    asyncio.run(scenario())


def test_a_full_worker_queue_is_tried_again(monkeypatch):
    monkeypatch.setattr(document_store, "BUSY_RETRY_S", 0.01)

    async def scenario():
        translations, store = answering_store(busy=3)
        document_id, key = store.add(document("hello"))
        await settled(store)
        assert store.get(document_id).status == "done" and translations.busy == 0
        assert len(document_id) == 32 and len(key) == 64

    asyncio.run(scenario())


def test_a_failed_translation_says_why():
    async def failing(request, texts, options):
        raise ApiError(400, "Invalid request: a.txt:1: bad")

    async def scenario():
        store = DocumentStore(failing, Usage())
        document_id, _ = store.add(document("hello"))
        await settled(store)
        kept = store.get(document_id)
        assert (kept.status, kept.error, kept.size) == ("error", "Invalid request: a.txt:1: bad", 0)

    asyncio.run(scenario())


def test_room_is_made_from_the_oldest_finished_then_refused(monkeypatch):
    monkeypatch.setattr(document_store, "MAX_DOCUMENTS", 3)

    async def scenario():
        translations, store = answering_store()
        first, second = store.add(document("one"))[0], store.add(document("two"))[0]
        await settled(store)
        translations.release.clear()  # from now on, documents stay translating
        third = store.add(document("three"))[0]
        store.add(document("four"))  # the oldest finished goes
        assert list(store.documents)[:2] == [second, third] and first not in store.documents
        store.add(document("five"))
        with pytest.raises(ApiError) as refused:  # all three still to translate
            store.add(document("six"))
        assert refused.value.status == 429
        with pytest.raises(ApiError) as gone:
            store.get(first)
        assert gone.value.status == 404 and "downloaded already" in gone.value.message
        translations.release.set()
        await settled(store)

    asyncio.run(scenario())


def test_bytes_are_bounded_and_finished_documents_expire(monkeypatch):
    monkeypatch.setattr(document_store, "MAX_BYTES", 100)

    async def scenario():
        translations, store = answering_store()
        with pytest.raises(ApiError) as too_large:
            store.add(document("big", size=101))
        assert too_large.value.status == 413
        kept = store.add(document("hello"))[0]
        await settled(store)
        monkeypatch.setattr(document_store, "EXPIRY_S", 0.0)
        with pytest.raises(ApiError):
            store.get(kept)
        assert not store.documents

    asyncio.run(scenario())
