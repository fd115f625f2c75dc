"""OpenAI's completions API for a decoder-only language model: ``/v1/completions`` (plain, or
streamed as server-sent events) and ``/v1/models``. The handlers are the methods of
``CompletionRoutes``."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from seq2seq.decoding.sampling import SamplingConfig
from seq2seq.serve.handling import ServerSettings, authorize, submit, wait_for
from seq2seq.serve.protocol import ApiError, Limits, openai_error, valid_text
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
    """The routes; their handlers are the methods of ``CompletionRoutes``."""
    routes = CompletionRoutes(served, settings, worker)
    app.add_api_route("/v1/models", routes.models, methods=["GET"])
    # response_model=None: the answer is a dict, or a StreamingResponse when streamed.
    app.add_api_route("/v1/completions", routes.completions, methods=["POST"], response_model=None)


@dataclass(eq=False)  # handlers: compared and hashed as themselves
class CompletionRoutes:
    """The handlers, with what they share: the served model, the settings and the worker."""

    served: ServedModel
    settings: ServerSettings
    worker: BatchingWorker

    async def models(self) -> dict:
        # No docstring: FastAPI would publish it as the route's OpenAPI description.
        return {
            "object": "list",
            "data": [
                {"id": self.served.name, "object": "model", "created": 0, "owned_by": "seq2seq"}
            ],
        }

    async def completions(
        self, body: CompletionRequest, request: Request
    ) -> dict[str, Any] | StreamingResponse:
        """OpenAI's completions for a decoder-only language model (streamed with stream)."""
        authorize(self.settings, None, request)
        self._check_model(body.model)
        prompts = _checked_prompts(body.prompt, self.settings.limits)
        stops = _stop_strings(body.stop)
        sampling = SamplingConfig(body.temperature, body.top_k, body.top_p, body.seed)
        work = CompletionWork(prompts, body.n, body.max_tokens, sampling)
        request.state.sentences = len(prompts) * body.n
        job = Job(key=None, size=len(prompts) * body.n, cost=0, payload=work)
        head = _answer_head(self.served.name)
        if body.stream:
            return _stream(self.worker, job, work, stops, partial(_chunk, head))
        results = await wait_for(request, submit(self.worker, job))
        return _whole_answer(head, results, stops, body.n)

    def _check_model(self, asked: str | None) -> None:
        """A 404 for another model's name; a 400 when the served model only translates."""
        name = self.served.name
        if asked not in (None, "", name):
            raise ApiError(
                404, f"The model `{asked}` does not exist (this server has `{name}`)", "model"
            )
        if self.served.generator is None:
            raise ApiError(
                400,
                f"{name} is a translation model: use POST /translate or /v1/translate",
                "model",
            )


def _checked_prompts(prompt: str | list[str], limits: Limits) -> list[str]:
    """The prompts as a list, within the request limits, each a valid text."""
    prompts = prompt if isinstance(prompt, list) else [prompt]
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise ApiError(
            400, "Invalid request: prompt must be a string or an array of strings", "prompt"
        )
    limits.check(prompts)
    return [valid_text(prompt) for prompt in prompts]


def _stop_strings(stop: str | list[str] | None) -> list[str]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    return [text for text in stops if text]  # an empty stop string stops nothing


def _answer_head(model: str) -> dict[str, Any]:
    """The fields that open every answer and every streamed chunk of one request."""
    return {
        "id": f"cmpl-{uuid.uuid4().hex[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
    }


def _choice(index: int, text: str, reason: str | None) -> dict[str, Any]:
    return {"index": index, "text": text, "logprobs": None, "finish_reason": reason}


def _chunk(head: dict[str, Any], index: int, text: str, reason: str | None) -> dict[str, Any]:
    """One server-sent event's data: a piece of one choice's text."""
    return {**head, "choices": [_choice(index, text, reason)]}


def _whole_answer(head: dict[str, Any], results: list, stops: list[str], n: int) -> dict:
    """The answer not streamed: every choice cut at its first stop string, and the usage."""
    choices, prompt_tokens, completion_tokens = [], 0, 0
    for index, completion in enumerate(results):
        text, stopped = cut_at_stop(completion.text, stops)
        choices.append(_choice(index, text, "stop" if stopped else completion.finish_reason))
        if index % n == 0:  # a prompt's n samples share its tokens: counted once
            prompt_tokens += completion.prompt_tokens
        completion_tokens += completion.completion_tokens
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return {**head, "choices": choices, "usage": usage}


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
