"""The HTTP server: a FastAPI app over one ``ServedModel`` and its batching worker.

Routes: ``/translate``, ``/languages``, ``/detect`` (LibreTranslate's API) and ``/v1/translate``
(ours: n-best, scores, attention) in ``translation_routes``; ``/v1/completions`` and
``/v1/models`` (OpenAI's, for a decoder-only language model) in ``completion_routes``;
``/v2/translate``, ``/v2/glossaries`` and the rest of DeepL's API in ``deepl_routes``; here the
errors, ``/health``, ``/v1/stats``, ``/frontend/settings``, the web page at ``/`` and the log.
Model work happens in the worker thread; the event loop only parses, queues and answers, so
``/health`` and new requests are answered while a batch decodes.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from seq2seq.inference.translator import ANNOTATION_ONLY_IGNORED
from seq2seq.serve.completion_routes import add_completion_routes
from seq2seq.serve.deepl_routes import add_deepl_routes
from seq2seq.serve.files import SUPPORTED
from seq2seq.serve.glossaries import GlossaryStore
from seq2seq.serve.handling import ClientGone, ServerSettings
from seq2seq.serve.protocol import (
    ApiError,
    openai_error,
)
from seq2seq.serve.served_model import ServedModel
from seq2seq.serve.translation_routes import add_translation_routes
from seq2seq.serve.worker import BatchingWorker, Job

log = logging.getLogger("seq2seq.serve")
OPENAI_PATHS = ("/v1/completions", "/v1/models")
DEEPL_PATHS = ("/v2/", "/v3/")


def _with_settings(served: ServedModel, settings: ServerSettings) -> ServedModel:
    """``served`` with a translator of its own (sharing the engine) whose glossaries use the
    constrained search or not, that truecases or not and keeps the server's verbatim spans:
    another app, or a caller, holding the same ``ServedModel`` keeps its settings; the
    repetition guard's settings, when given, over the checkpoint's."""
    truecased = served.translator.with_truecase(settings.truecase)
    translator = copy.copy(truecased.with_search(**settings.search_changes))
    search = not settings.glossary_annotation_only
    translator.constrain_terms = search
    translator.verbatim = settings.verbatim  # what TranslateOptions(verbatim=True) keeps
    if not search and not translator.annotates_terms:
        log.warning(ANNOTATION_ONLY_IGNORED)
    own = copy.copy(served)
    own.translator = translator
    return own


def create_app(served: ServedModel, settings: ServerSettings = ServerSettings()) -> FastAPI:  # noqa: B008
    """The app, with its worker thread started; the app's shutdown finishes queued work."""
    store = GlossaryStore(settings.glossary_dir)  # before the thread: a bad directory fails
    if served.translator is not None:
        served = _with_settings(served, settings)
    worker = BatchingWorker(
        lambda jobs: _run(served, settings, jobs),
        max_batch_tokens=settings.max_batch_tokens,
        max_wait=settings.max_wait_ms / 1000.0,
        max_queue=settings.max_queue,
        continuous=(
            served.continuous(settings.max_batch_tokens, settings.beam_size)
            if settings.continuous
            else None
        ),
        wait_for_arrivals=True,
    ).start()

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # noqa: ANN202
        yield
        # uvicorn has stopped accepting and finished in-flight requests: stop the thread.
        await asyncio.to_thread(worker.close, 30.0)

    app = FastAPI(
        title="seq2seq", summary=f"English→Chinese translation: {served.name}", lifespan=lifespan
    )
    app.state.served, app.state.settings, app.state.worker = served, settings, worker
    app.state.glossaries = store
    app.add_middleware(RequestLog)
    app.add_middleware(CountRequests, worker=worker)
    _add_error_handlers(app)
    translate_texts = add_translation_routes(app, served, settings, worker)
    add_completion_routes(app, served, settings, worker)
    add_deepl_routes(app, served, settings, translate_texts, store)
    _add_page_routes(app, served, settings, worker)
    return app


def _run(served: ServedModel, settings: ServerSettings, jobs: list[Job]) -> list[Any]:
    """What the worker thread runs for a batch of jobs sharing a key."""
    if jobs[0].key is None:
        return [served.complete_job(jobs[0].payload)]
    if jobs[0].key == ("finish",):  # sentence translations aligned for markup: model work
        return [served.translator.finish(*job.payload) for job in jobs]  # type: ignore[union-attr]
    _, beam_size, n_best, _ = jobs[0].key
    return served.translate_jobs(jobs, beam_size, n_best, settings.max_batch_tokens)


# -- errors ---------------------------------------------------------------------------------


def _error_response(request: Request, error: ApiError) -> JSONResponse:
    if request.url.path.startswith(OPENAI_PATHS):
        return JSONResponse(
            openai_error(error.status, error.message, error.param), status_code=error.status
        )
    if request.url.path.startswith(DEEPL_PATHS):
        return JSONResponse({"message": error.message}, status_code=error.status)
    return JSONResponse({"error": error.message}, status_code=error.status)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, error: ApiError) -> JSONResponse:
        return _error_response(request, error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        """Starlette's own answers (405, 404, an unreadable body) in our error shapes."""
        return _error_response(request, ApiError(error.status_code, str(error.detail)))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        message = f"Invalid request: {where + ': ' if where else ''}{first.get('msg')}"
        return _error_response(request, ApiError(400, message, where or None))

    @app.exception_handler(ClientGone)
    async def gone(request: Request, error: ClientGone) -> Response:
        return Response(status_code=499)  # nginx's "client closed request"; nobody reads it

    @app.exception_handler(Exception)
    async def crashed(request: Request, error: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return _error_response(request, ApiError(500, f"internal error: {error}"))


# -- health, settings and the page ----------------------------------------------------------


def _add_page_routes(
    app: FastAPI, served: ServedModel, settings: ServerSettings, worker: BatchingWorker
) -> None:
    page = resources.files("seq2seq.serve").joinpath("static/index.html").read_text("utf-8")

    @app.get("/health")
    async def health() -> JSONResponse:
        """{"status": "ok"} while the model's worker runs (the model loads before the port
        opens); 503 once it has stopped."""
        if not worker.alive:
            return JSONResponse({"status": "stopped"}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/v1/stats")
    async def stats() -> dict:
        """The worker's counters: how well requests are being batched, and the queue."""
        return {
            "batches": worker.batches,
            "steps": worker.steps,
            "jobs": worker.jobs,
            "cancelled": worker.cancelled,
            "waiting_sentences": worker.waiting,
            "decoding_sentences": worker.decoding,
        }

    @app.get("/frontend/settings")
    async def frontend_settings() -> dict:
        """What the page (and LibreTranslate's own front end) needs to know."""
        return {
            "charLimit": settings.limits.char_limit,
            "batchLimit": settings.limits.batch_limit,
            "keyRequired": settings.api_keys is not None,
            "model": served.name,
            "kind": served.kind,
            "mode": "translate" if served.translates else "complete",
            "engine": served.engine,
            "beamSize": settings.beam_size,
            "attention": served.attention,
            "filesTranslation": served.translates,
            "supportedFilesFormat": list(SUPPORTED) if served.translates else [],
            "fileLimit": settings.file_limit,
            "language": {
                "source": {"code": "en", "name": "English"},
                "target": {"code": "zh", "name": "Chinese"},
            },
        }

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)


class RequestLog:
    """Pure ASGI middleware: one log line per request (method, path, status, sentences, ms)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), [0]

        async def sending(message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            sentences = scope.get("state", {}).get("sentences", 0)
            ms = 1000.0 * (time.perf_counter() - start)
            log.info(
                "%s %s %d %d sentences %.1f ms",
                scope["method"],
                scope["path"],
                status[0],
                sentences,
                ms,
            )


class CountRequests:
    """Pure ASGI middleware: tells the worker when an HTTP request starts and ends, so it
    waits for company only while a received request has yet to queue its job."""

    def __init__(self, app, worker: BatchingWorker) -> None:
        self.app, self.worker = app, worker

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.worker.request_started()
        try:
            await self.app(scope, receive, send)
        finally:
            self.worker.request_ended()
