"""The HTTP server: a FastAPI app over one ``ServedModel`` and its batching worker.

Routes: ``/translate``, ``/languages``, ``/detect`` (LibreTranslate's API), ``/v1/translate``
(ours: n-best, scores, attention), ``/v1/completions`` and ``/v1/models`` (OpenAI's, for a
decoder-only language model), ``/health``, ``/frontend/settings`` and the web page at ``/``.
Model work happens in the worker thread; the event loop only parses, queues and answers, so
``/health`` and new requests are answered while a batch decodes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from seq2seq.search import SamplingConfig
from seq2seq.serve.batching import BatchingWorker, Job, QueueFull, WorkerClosed
from seq2seq.serve.model import CompletionWork, ServedModel, TranslatedSentence, TranslationWork
from seq2seq.serve.protocol import (
    MAX_BEAM,
    ApiError,
    Limits,
    detected_language,
    languages,
    openai_error,
    parse_body,
    split_lines,
    translate_args,
)

log = logging.getLogger("seq2seq.serve")
OPENAI_PATHS = ("/v1/completions", "/v1/models")


@dataclass(frozen=True)
class ServerSettings:
    """The server's knobs (``seq2seq serve --help`` documents each)."""

    beam_size: int = 5
    max_batch_tokens: int = 4000
    max_wait_ms: float = 5.0
    max_queue: int = 2000
    limits: Limits = Limits()
    api_keys: frozenset[str] | None = None
    continuous: bool = True  # greedy requests join and leave the batch between steps


# -- /v1 request bodies ---------------------------------------------------------------------


class NativeTranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | list[str]
    beam_size: int | None = Field(None, ge=1, le=MAX_BEAM)
    n_best: int = Field(1, ge=1, le=MAX_BEAM)
    return_scores: bool = False
    return_attention: bool = False
    api_key: str | None = None


class CompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # OpenAI clients send fields we do not use

    model: str | None = None
    prompt: str | list[str] = ""
    max_tokens: int = Field(16, ge=1, le=4096)
    temperature: float = Field(1.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)
    n: int = Field(1, ge=1, le=16)
    stream: bool = False
    seed: int | None = None
    stop: str | list[str] | None = None
    logprobs: int | None = None
    echo: bool = False


def create_app(served: ServedModel, settings: ServerSettings = ServerSettings()) -> FastAPI:  # noqa: B008
    """The app, with its worker thread started; the app's shutdown finishes queued work."""
    worker = BatchingWorker(
        lambda jobs: _run(served, settings, jobs),
        max_batch_tokens=settings.max_batch_tokens,
        max_wait=settings.max_wait_ms / 1000.0,
        max_queue=settings.max_queue,
        continuous=served.continuous(settings.max_batch_tokens) if settings.continuous else None,
    ).start()

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # noqa: ANN202
        yield
        # uvicorn has stopped accepting and finished in-flight requests: stop the thread.
        await asyncio.to_thread(worker.close, 30.0)

    app = FastAPI(title="seq2seq", summary=f"English→Chinese translation: {served.name}",
                  lifespan=lifespan)  # fmt: skip
    app.state.served, app.state.settings, app.state.worker = served, settings, worker
    app.add_middleware(RequestLog)
    _add_error_handlers(app)
    _add_translation_routes(app, served, settings, worker)
    _add_completion_routes(app, served, settings, worker)
    _add_page_routes(app, served, settings, worker)
    return app


def _run(served: ServedModel, settings: ServerSettings, jobs: list[Job]) -> list[Any]:
    """What the worker thread runs for a batch of jobs sharing a key."""
    if jobs[0].key is None:
        return [served.complete_job(jobs[0].payload)]
    _, beam_size, n_best = jobs[0].key
    return served.translate_jobs(jobs, beam_size, n_best, settings.max_batch_tokens)


# -- errors ---------------------------------------------------------------------------------


def _error_response(request: Request, error: ApiError) -> JSONResponse:
    if request.url.path.startswith(OPENAI_PATHS):
        return JSONResponse(openai_error(error.status, error.message, error.param),
                            status_code=error.status)  # fmt: skip
    return JSONResponse({"error": error.message}, status_code=error.status)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, error: ApiError) -> JSONResponse:
        return _error_response(request, error)

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


def _authorize(settings: ServerSettings, key: Any, request: Request) -> None:
    """With ``--api-keys``, a listed key in ``api_key`` or ``Authorization: Bearer``; without,
    any key (or none) is accepted and ignored, as LibreTranslate does."""
    if settings.api_keys is None:
        return
    bearer = request.headers.get("authorization", "")
    if not key and bearer.lower().startswith("bearer "):
        key = bearer[7:].strip()
    if not isinstance(key, str) or key not in settings.api_keys:
        raise ApiError(403, "Invalid API key" if key else "Please provide an API key", "api_key")


# -- translation ----------------------------------------------------------------------------


def _add_translation_routes(app: FastAPI, served: ServedModel, settings: ServerSettings,
                            worker: BatchingWorker) -> None:  # fmt: skip
    async def translate(request: Request, lines: list[str], beam_size: int, n_best: int,
                        attention: bool = False) -> list[TranslatedSentence]:  # fmt: skip
        if served.translator is None:
            raise ApiError(400, f"{served.name} is a language model, not a translator: use "
                                "POST /v1/completions")  # fmt: skip
        nonempty = [i for i, line in enumerate(lines) if line.strip()]
        encoded: list[list[int]] = [[] for _ in lines]
        for i, ids in zip(nonempty, served.translator.encode([lines[i] for i in nonempty]),
                          strict=True):  # fmt: skip
            encoded[i] = ids
        request.state.sentences = len(nonempty)
        if not any(encoded):
            return [TranslatedSentence([]) for _ in lines]
        job = Job(key=("translate", beam_size, n_best), size=len(nonempty),
                  cost=sum(map(len, encoded)) * beam_size,
                  payload=TranslationWork(encoded, attention))  # fmt: skip
        return await _wait(request, _submit(worker, job))

    @app.post("/translate")
    @app.get("/translate", include_in_schema=False)
    async def libre_translate(request: Request) -> JSONResponse:
        """LibreTranslate's /translate: q (string or array), source, target, format,
        alternatives, api_key; from JSON, a form or the query string."""
        args = await _libre_arguments(request)
        _authorize(settings, args.get("api_key"), request)
        checked = translate_args(args, settings.limits)
        per_text = [split_lines(text) for text in checked.texts]
        n_best = checked.alternatives + 1
        beam = max(settings.beam_size, n_best)
        found = await translate(request, [line for lines in per_text for line in lines], beam,
                                n_best)  # fmt: skip
        texts, alternatives, start = [], [], 0
        for lines in per_text:
            sentences = found[start : start + len(lines)]
            start += len(lines)
            ranked = [[served.text(h) for h in s.hypotheses] or [""] for s in sentences]
            texts.append("\n".join(r[0] for r in ranked))
            alternatives.append(["\n".join(r[min(k, len(r) - 1)] for r in ranked)
                                 for k in range(1, 1 + checked.alternatives)
                                 if any(len(r) > k for r in ranked)])  # fmt: skip
        answer: dict[str, Any] = {"translatedText": texts if checked.batch else texts[0]}
        if checked.alternatives:
            answer["alternatives"] = alternatives if checked.batch else alternatives[0]
        if checked.detect:
            detected = [detected_language(text) for text in checked.texts]
            answer["detectedLanguage"] = detected if checked.batch else detected[0]
        return JSONResponse(answer)

    @app.get("/languages")
    @app.post("/languages", include_in_schema=False)
    async def libre_languages() -> list[dict[str, Any]]:
        """What the model translates: English to Chinese (none for a language model)."""
        return languages() if served.translates else []

    @app.post("/detect")
    async def libre_detect(request: Request) -> list[dict[str, Any]]:
        args = await _libre_arguments(request)
        _authorize(settings, args.get("api_key"), request)
        if not isinstance(args.get("q"), str):
            raise ApiError(400, "Invalid request: missing q parameter", "q")
        return [detected_language(args["q"])]

    @app.post("/v1/translate")
    async def native_translate(body: NativeTranslateRequest, request: Request) -> dict:
        """Each text as one segment: n-best hypotheses with scores, and cross-attention."""
        _authorize(settings, body.api_key, request)
        texts = body.text if isinstance(body.text, list) else [body.text]
        settings.limits.check(texts)
        if body.return_attention and not served.attention:
            raise ApiError(400, "return_attention needs a torch engine (not CTranslate2)")
        beam = max(body.beam_size or settings.beam_size, body.n_best)
        lines = [" ".join(text.split()) for text in texts]
        found = await translate(request, lines, beam, body.n_best, body.return_attention)
        out = []
        for sentence in found:
            best = served.text(sentence.hypotheses[0]) if sentence.hypotheses else ""
            item: dict[str, Any] = {"text": best}
            if body.return_scores or body.n_best > 1:
                item["hypotheses"] = [
                    {"text": served.text(h), "score": round(h.score, 4),
                     "log_prob": round(h.log_prob, 4), "tokens": len(h.tokens)}
                    for h in sentence.hypotheses
                ]  # fmt: skip
            if body.return_attention:
                item["attention"] = sentence.attention
            out.append(item)
        return {"model": served.name, "beam_size": beam, "translations": out}


async def _libre_arguments(request: Request) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "")
    query = dict(request.query_params)
    if content_type.lower().startswith("multipart/form-data"):
        try:
            form = await request.form()
        except Exception as error:  # a broken multipart body is the client's mistake
            raise ApiError(400, f"Invalid request: malformed form body ({error})") from None
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        return parse_body(b"", "", {**query, **fields})
    return parse_body(await request.body(), content_type, query)


def _submit(worker: BatchingWorker, job: Job) -> Future:
    try:
        return worker.submit(job)
    except QueueFull as error:
        raise ApiError(429, str(error)) from None
    except WorkerClosed as error:
        raise ApiError(503, str(error)) from None


async def _wait(request: Request, future: Future) -> Any:
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
    except ApiError:
        raise
    except Exception as error:
        raise ApiError(500, f"translation failed: {type(error).__name__}: {error}") from None


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


# -- completions (OpenAI) -------------------------------------------------------------------


def _add_completion_routes(app: FastAPI, served: ServedModel, settings: ServerSettings,
                           worker: BatchingWorker) -> None:  # fmt: skip
    @app.get("/v1/models")
    async def models() -> dict:
        return {
            "object": "list",
            "data": [{"id": served.name, "object": "model", "created": 0, "owned_by": "seq2seq"}],
        }

    @app.post("/v1/completions", response_model=None)
    async def completions(body: CompletionRequest, request: Request):  # noqa: ANN202
        """OpenAI's completions for a decoder-only language model (streamed with stream)."""
        _authorize(settings, None, request)
        if body.model not in (None, "", served.name):
            raise ApiError(404, f"The model `{body.model}` does not exist (this server has "
                                f"`{served.name}`)", "model")  # fmt: skip
        if served.generator is None:
            raise ApiError(400, f"{served.name} is a translation model: use POST /translate or "
                                "/v1/translate", "model")  # fmt: skip
        prompts = body.prompt if isinstance(body.prompt, list) else [body.prompt]
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise ApiError(400, "Invalid request: prompt must be a string or an array of "
                                "strings", "prompt")  # fmt: skip
        settings.limits.check(prompts)
        stops = [body.stop] if isinstance(body.stop, str) else [s for s in body.stop or [] if s]
        sampling = SamplingConfig(body.temperature, body.top_k, body.top_p, body.seed)
        work = CompletionWork(prompts, body.n, body.max_tokens, sampling)
        request.state.sentences = len(prompts) * body.n
        job = Job(key=None, size=len(prompts) * body.n, cost=0, payload=work)
        created, ident = int(time.time()), f"cmpl-{uuid.uuid4().hex[:24]}"

        def chunk(index: int, text: str, reason: str | None) -> dict:
            return {"id": ident, "object": "text_completion", "created": created,
                    "model": served.name, "choices": [{"index": index, "text": text,
                    "logprobs": None, "finish_reason": reason}]}  # fmt: skip

        if body.stream:
            return _stream(worker, job, work, stops, chunk)
        results = await _wait(request, _submit(worker, job))
        choices, prompt_tokens, completion_tokens = [], 0, 0
        for index, completion in enumerate(results):
            text, stopped = cut_at_stop(completion.text, stops)
            choices.append(
                {
                    "index": index,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": "stop" if stopped else completion.finish_reason,
                }
            )
            if index % body.n == 0:
                prompt_tokens += completion.prompt_tokens
            completion_tokens += completion.completion_tokens
        return {"id": ident, "object": "text_completion", "created": created,
                "model": served.name, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}  # fmt: skip


def _stream(worker: BatchingWorker, job: Job, work: CompletionWork, stops: list[str],
            chunk) -> StreamingResponse:  # fmt: skip
    """Server-sent events: one chunk per new piece of text, a last chunk per choice with its
    finish_reason, then ``data: [DONE]``. A client that goes away stops the generation."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    work.on_text = lambda index, piece: loop.call_soon_threadsafe(events.put_nowait,
                                                                  (index, piece))  # fmt: skip
    future = _submit(worker, job)  # a full queue is a 429 before the stream starts
    future.add_done_callback(lambda _: loop.call_soon_threadsafe(events.put_nowait, None))
    scanners: dict[int, StopScanner] = {}

    async def lines():  # noqa: ANN202
        try:
            while (event := await events.get()) is not None:
                index, piece = event
                scanner = scanners.setdefault(index, StopScanner(stops))
                text = scanner.feed(piece)
                if text:
                    yield _sse(chunk(index, text, None))
            if future.cancelled():
                return
            if future.exception() is not None:
                message = f"generation failed: {future.exception()}"
                yield _sse(openai_error(500, message))
            else:
                for index, completion in enumerate(future.result()):
                    scanner = scanners.setdefault(index, StopScanner(stops))
                    rest = scanner.flush()
                    reason = "stop" if scanner.stopped else completion.finish_reason
                    yield _sse(chunk(index, rest, reason))
            yield "data: [DONE]\n\n"
        finally:
            work.cancelled.set()
            future.cancel()

    return StreamingResponse(lines(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})  # fmt: skip


def _sse(data: dict) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """``text`` up to the first stop string (excluded), and whether one was found."""
    cuts = [text.find(stop) for stop in stops if stop in text]
    return (text[: min(cuts)], True) if cuts else (text, False)


class StopScanner:
    """Streams text up to the first stop string, holding back a tail that might begin one."""

    def __init__(self, stops: list[str]) -> None:
        self.stops, self.text, self.shown, self.stopped = stops, "", 0, False

    def feed(self, piece: str) -> str:
        if self.stopped:
            return ""
        self.text += piece
        cut, self.stopped = cut_at_stop(self.text, self.stops)
        end = len(cut) if self.stopped else len(self.text) - self._held(self.text)
        out, self.shown = self.text[self.shown : end], max(self.shown, end)
        return out

    def flush(self) -> str:
        if self.stopped:
            return ""
        out, self.shown = self.text[self.shown :], len(self.text)
        return out

    def _held(self, text: str) -> int:
        """Length of the longest end of ``text`` that is a proper start of a stop string."""
        return max((n for stop in self.stops for n in range(1, len(stop))
                    if text.endswith(stop[:n])), default=0)  # fmt: skip


# -- health, settings and the page ----------------------------------------------------------


def _add_page_routes(app: FastAPI, served: ServedModel, settings: ServerSettings,
                     worker: BatchingWorker) -> None:  # fmt: skip
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
        return {"batches": worker.batches, "steps": worker.steps, "jobs": worker.jobs,
                "cancelled": worker.cancelled,
                "waiting_sentences": worker.waiting,
                "decoding_sentences": worker.decoding}  # fmt: skip

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
            "language": {"source": {"code": "en", "name": "English"},
                         "target": {"code": "zh", "name": "Chinese"}},
        }  # fmt: skip

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
            log.info("%s %s %d %d sentences %.1f ms", scope["method"], scope["path"],
                     status[0], sentences, ms)  # fmt: skip
