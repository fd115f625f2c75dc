"""What every route shares: the server's settings, API keys, and handing a job to the worker
and waiting for it (or for the client to leave)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seq2seq.checks import at_least, finite, writable_directory
from seq2seq.decoding.repetition import check_guard
from seq2seq.formats.verbatim import Verbatim
from seq2seq.inference.pieces import MAX_TOKENS
from seq2seq.serve.protocol import ApiError, Limits
from seq2seq.serve.worker import BatchingWorker, Job, QueueFull, WorkerClosed

if TYPE_CHECKING:  # FastAPI only annotates here: the settings load without the serve extra
    from fastapi import Request


@dataclass(frozen=True)
class ServerSettings:
    """The server's knobs, and the one home of their defaults: ``seq2seq serve``'s options
    take theirs from these fields (``seq2seq serve --help`` documents each)."""

    beam_size: int = 5
    max_batch_tokens: int = MAX_TOKENS  # source tokens x beam in a shared batch
    max_wait_ms: float = 5.0
    max_queue: int = 2000
    limits: Limits = Limits()
    api_keys: frozenset[str] | None = None
    continuous: bool = True  # sentences join and leave the batch between decoder steps
    file_limit: int = 200_000  # characters of a file sent to /translate_file
    glossary_dir: Path | None = None  # DeepL-API glossaries saved here (None: in memory only)
    # A model trained with term annotation meets a glossary by the annotation alone (no
    # constrained search); a model without term tags still searches (Translator.constraints).
    glossary_annotation_only: bool = False
    # SHOUTED and Title Cased requests read in sentence case with the checkpoint's learnt word
    # forms (seq2seq.data.truecase); False: every request as written (--no-truecase).
    truecase: bool = True
    # What every request keeps as written (seq2seq.formats.verbatim: the built-in kinds and a
    # --verbatim file's terms); None: nothing (--no-verbatim). /v1/translate's "verbatim":
    # false switches it off for one request.
    verbatim: Verbatim | None = field(default_factory=Verbatim)
    # The repetition guard (seq2seq.decoding.repetition) for every request; None: the
    # checkpoint's own setting.
    max_repeats: int | None = None
    no_repeat_ngram_size: int | None = None
    repetition_penalty: float | None = None

    @property
    def search_changes(self) -> dict[str, Any]:
        """The search settings given, to apply over the checkpoint's."""
        given = {
            "max_repeats": self.max_repeats,
            "no_repeat_ngram_size": self.no_repeat_ngram_size,
            "repetition_penalty": self.repetition_penalty,
        }
        return {name: value for name, value in given.items() if value is not None}

    def __post_init__(self) -> None:
        """Refuse a bad value when the settings are made, before the model loads; each error
        names the option of ``seq2seq serve`` that sets the field."""
        if self.glossary_dir is not None:
            writable_directory(self.glossary_dir, "--glossary-dir")
        for option, value in (
            ("--beam-size", self.beam_size),
            ("--max-batch-tokens", self.max_batch_tokens),
            ("--max-queue", self.max_queue),
            ("--char-limit", self.limits.char_limit),
            ("--batch-limit", self.limits.batch_limit),
            ("--file-limit", self.file_limit),
        ):
            at_least(value, 1, option)
        check_guard(
            0 if self.max_repeats is None else self.max_repeats,
            0 if self.no_repeat_ngram_size is None else self.no_repeat_ngram_size,
            1.0 if self.repetition_penalty is None else self.repetition_penalty,
        )
        finite(self.max_wait_ms, "--max-wait-ms")  # inf would stop the worker at its first job
        at_least(self.max_wait_ms, 0, "--max-wait-ms")
        if self.limits.batch_limit > self.max_queue:
            raise ValueError(
                f"--batch-limit ({self.limits.batch_limit}) must not exceed "
                f"--max-queue ({self.max_queue}): such a request could never be "
                "queued"
            )


def authorize(settings: ServerSettings, key: Any, request: Request) -> None:
    """With ``--api-keys``, a listed key in ``api_key`` or ``Authorization: Bearer``; without,
    any key (or none) is accepted and ignored, as LibreTranslate does."""
    if settings.api_keys is None:
        return
    bearer = request.headers.get("authorization", "")
    if not key and bearer.lower().startswith("bearer "):
        key = bearer[7:].strip()
    if not isinstance(key, str) or key not in settings.api_keys:
        raise ApiError(403, "Invalid API key" if key else "Please provide an API key", "api_key")


def submit(worker: BatchingWorker, job: Job) -> Future:
    try:
        return worker.submit(job)
    except QueueFull as error:
        raise ApiError(429, str(error)) from None
    except WorkerClosed as error:
        raise ApiError(503, str(error)) from None


async def wait_for(request: Request, future: Future) -> Any:
    """The job's result; if the client goes away first, the job is cancelled (skipped if it
    has not started) and the request ends without an answer."""
    waiting = asyncio.wrap_future(future)
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=0.5)
        if done:
            break
        if await request.is_disconnected():
            future.cancel()
            raise ClientGone
    try:
        return waiting.result()
    except Exception as error:
        raise ApiError(500, f"decoding failed: {type(error).__name__}: {error}") from None


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""
