"""OpenAI's completions API for a decoder-only language model: ``/v1/completions`` (plain, or
streamed as server-sent events) and ``/v1/models``."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from seq2seq.decoding.sampling import SamplingConfig
from seq2seq.serve.handling import ServerSettings, authorize, submit, wait_for
from seq2seq.serve.protocol import ApiError, openai_error, valid_text
from seq2seq.serve.served_model import CompletionWork, ServedModel
from seq2seq.serve.worker import BatchingWorker, Job


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


def add_completion_routes(
    app: FastAPI, served: ServedModel, settings: ServerSettings, worker: BatchingWorker
) -> None:
    @app.get("/v1/models")
    async def models() -> dict:
        return {
            "object": "list",
            "data": [{"id": served.name, "object": "model", "created": 0, "owned_by": "seq2seq"}],
        }

    @app.post("/v1/completions", response_model=None)
    async def completions(body: CompletionRequest, request: Request):  # noqa: ANN202
        """OpenAI's completions for a decoder-only language model (streamed with stream)."""
        authorize(settings, None, request)
        if body.model not in (None, "", served.name):
            raise ApiError(
                404,
                f"The model `{body.model}` does not exist (this server has `{served.name}`)",
                "model",
            )
        if served.generator is None:
            raise ApiError(
                400,
                f"{served.name} is a translation model: use POST /translate or /v1/translate",
                "model",
            )
        prompts = body.prompt if isinstance(body.prompt, list) else [body.prompt]
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise ApiError(
                400, "Invalid request: prompt must be a string or an array of strings", "prompt"
            )
        settings.limits.check(prompts)
        prompts = [valid_text(prompt) for prompt in prompts]
        stops = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
        stops = [stop for stop in stops if stop]  # an empty stop string stops nothing
        sampling = SamplingConfig(body.temperature, body.top_k, body.top_p, body.seed)
        work = CompletionWork(prompts, body.n, body.max_tokens, sampling)
        request.state.sentences = len(prompts) * body.n
        job = Job(key=None, size=len(prompts) * body.n, cost=0, payload=work)
        created, ident = int(time.time()), f"cmpl-{uuid.uuid4().hex[:24]}"

        def chunk(index: int, text: str, reason: str | None) -> dict:
            return {
                "id": ident,
                "object": "text_completion",
                "created": created,
                "model": served.name,
                "choices": [
                    {"index": index, "text": text, "logprobs": None, "finish_reason": reason}
                ],
            }

        if body.stream:
            return _stream(worker, job, work, stops, chunk)
        results = await wait_for(request, submit(worker, job))
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
        return {
            "id": ident,
            "object": "text_completion",
            "created": created,
            "model": served.name,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _stream(
    worker: BatchingWorker, job: Job, work: CompletionWork, stops: list[str], chunk
) -> StreamingResponse:
    """Server-sent events: one chunk per new piece of text, a last chunk per choice with its
    finish_reason, then ``data: [DONE]``. A client that goes away stops the generation."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    work.on_text = lambda index, piece: loop.call_soon_threadsafe(events.put_nowait, (index, piece))
    future = submit(worker, job)  # a full queue is a 429 before the stream starts
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
                    rest = ""
                    if completion.text.startswith(scanner.text):  # text held back to the end
                        rest = scanner.feed(completion.text[len(scanner.text) :])
                    rest += scanner.flush()
                    reason = "stop" if scanner.stopped else completion.finish_reason
                    yield _sse(chunk(index, rest, reason))
            yield "data: [DONE]\n\n"
        finally:
            work.cancelled.set()
            future.cancel()

    return StreamingResponse(
        lines(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


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
        return max(
            (n for stop in self.stops for n in range(1, len(stop)) if text.endswith(stop[:n])),
            default=0,
        )
