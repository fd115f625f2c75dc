"""Cross-request batching: one worker thread owns the model and decodes jobs together.

Requests arrive on the event loop; each becomes a ``Job`` (its sentences, already encoded,
and how to decode them). The worker takes the oldest job, waits at most ``max_wait`` seconds
for company, and decodes every waiting job that can share its batch (same ``key``: same
search settings) up to ``max_batch_tokens``. With ``wait_for_arrivals`` (the server's way) it
waits only while a request the server has received has not yet queued its job
(``request_started``/``request_ended``): a client alone is never kept waiting for company
that cannot come. Because the decoding code makes a sentence's
output independent of its batch neighbours, batching changes speed, never a result.

The queue is bounded (``max_queue`` waiting sentences): a request beyond it is refused at once
(``QueueFull``, HTTP 429) instead of growing memory and timing out. A job whose client went
away is cancelled through its future and skipped if it has not started.

This module knows nothing of HTTP or of models: ``run`` is given by the caller.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger("seq2seq.serve")


class QueueFull(Exception):
    """More sentences are waiting than the server takes (``--max-queue``)."""


class WorkerClosed(Exception):
    """The worker is shutting down and takes no new jobs."""


@dataclass(eq=False)
class Job:
    """One request's work.

    Attributes:
        key: jobs with equal keys may be decoded in one batch; None = always alone.
        size: sentences it holds (what the queue bound counts).
        cost: padded tokens it adds to a batch (source tokens x beam size).
        payload: what ``run`` needs to decode it.
    """

    key: Hashable | None
    size: int
    cost: int
    payload: Any
    future: Future = field(default_factory=Future)


# run(jobs) -> one result per job, in order; the jobs share a key (or are one unbatchable job).
RunBatch = Callable[[Sequence[Job]], Sequence[Any]]


class Continuous(Protocol):
    """A decoder that jobs join and leave between steps (continuous batching)."""

    active: int  # sentences being decoded

    def accepts(self, job: Job) -> bool:
        """Whether the job is for this decoder (e.g. greedy translation)."""
        ...

    def has_room(self, cost: int) -> bool:
        """Whether jobs costing ``cost`` more fit the batch now."""
        ...

    def add(self, job: Job) -> list[tuple[Job, Any]]:
        """Start the job's sentences; returns jobs already done (e.g. only empty lines)."""
        ...

    def step(self) -> list[tuple[Job, Any]]:
        """One decoder step for every active sentence; returns the jobs it finished."""
        ...

    def abort(self) -> list[Job]:
        """Drop every job in progress (after a failure); returns them."""
        ...


class BatchingWorker:
    """A thread decoding batches of jobs; ``submit`` is safe from any thread."""

    def __init__(
        self,
        run: RunBatch,
        max_batch_tokens: int,
        max_wait: float,
        max_queue: int,
        continuous: Continuous | None = None,
        wait_for_arrivals: bool = False,
    ) -> None:
        if max_batch_tokens < 1 or max_wait < 0 or max_queue < 1:
            raise ValueError("max_batch_tokens and max_queue must be >= 1, max_wait >= 0")
        self.run = run
        self.continuous = continuous
        self.max_batch_tokens = max_batch_tokens
        self.max_wait = max_wait
        self.max_queue = max_queue
        self.wait_for_arrivals = wait_for_arrivals
        self._requests = 0  # requests received and not yet answered (request_started/ended)
        self._unanswered = 0  # jobs submitted whose future is not yet done
        self._pending: deque[Job] = deque()
        self._waiting = 0  # sentences in _pending
        self._closed = False
        self._condition = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="seq2seq-model", daemon=True)
        # Counters for GET /v1/stats: batches decoded, jobs decoded, jobs skipped (cancelled).
        self.batches = self.jobs = self.cancelled = self.steps = 0
        self.decoding = 0  # sentences in the batch being decoded now

    def start(self) -> BatchingWorker:
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def waiting(self) -> int:
        """Sentences queued and not yet being decoded."""
        return self._waiting

    def submit(self, job: Job) -> Future:
        """Queue ``job``; its future gets the result (or the exception ``run`` raised)."""
        with self._condition:
            if self._closed:
                raise WorkerClosed("the server is shutting down")
            if self._waiting + job.size > self.max_queue:  # jobs whose clients left go first
                gone = [waiting for waiting in self._pending if waiting.future.cancelled()]
                self._take(gone)
                self.cancelled += len(gone)
            # A job alone in the queue always fits, so a request of any allowed size can run.
            if self._waiting and self._waiting + job.size > self.max_queue:
                raise QueueFull(
                    f"server busy: {self._waiting} sentences waiting, {job.size} more would "
                    f"exceed the queue limit ({self.max_queue}); retry later"
                )
            self._pending.append(job)
            self._waiting += job.size
            self._unanswered += 1
            self._condition.notify()
        job.future.add_done_callback(self._answered)
        return job.future

    def request_started(self) -> None:
        """A request arrived that may queue a job (counted for ``wait_for_arrivals``)."""
        with self._condition:
            self._requests += 1
            self._condition.notify()

    def request_ended(self) -> None:
        """A request counted by ``request_started`` was answered."""
        with self._condition:
            self._requests -= 1
            self._condition.notify()

    def _answered(self, _: Future) -> None:
        with self._condition:
            self._unanswered -= 1

    def _company_expected(self) -> bool:
        """Whether waiting for company can pay: always, unless ``wait_for_arrivals``; then
        only while more requests are in flight than jobs are unanswered (a request is between
        its arrival and its job, e.g. being read or encoded). A request whose job is answered
        but whose response is still being written also counts, costing at most one wait."""
        return not self.wait_for_arrivals or self._requests > self._unanswered

    def close(self, timeout: float | None = None) -> None:
        """Finish the jobs already queued, then stop the thread."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            if self.continuous is not None and self.continuous.active:
                self._continuous_step()
                continue
            batch = self._next_batch()
            if batch is None:
                return
            batch = self._started(batch)
            if self.continuous is not None and batch and self.continuous.accepts(batch[0]):
                self._join(batch)
            elif batch:
                self._run(batch)

    def _started(self, batch: list[Job]) -> list[Job]:
        """The jobs whose clients still wait (marked running); cancelled ones are counted."""
        running = [job for job in batch if job.future.set_running_or_notify_cancel()]
        self.cancelled += len(batch) - len(running)
        return running

    def _continuous_step(self) -> None:
        """Between two steps: let waiting jobs join (or first run the oldest waiting job if it
        is for whole-batch decoding, so it never starves), then step once."""
        assert self.continuous is not None
        with self._condition:
            joining: list[Job] = []
            if self._pending and not self.continuous.accepts(self._pending[0]):
                other, _ = self._compatible()
                self._take(other)
            else:
                other, cost = [], 0
                while (
                    self._pending
                    and self.continuous.accepts(self._pending[0])
                    and self.continuous.has_room(cost + self._pending[0].cost)
                ):
                    cost += self._pending[0].cost
                    joining.append(self._pending[0])
                    self._take(joining[-1:])
        if other and (other := self._started(other)):
            self._run(other)
        try:
            self._join(self._started(joining))
            self.decoding = self.continuous.active
            self._deliver(self.continuous.step())
            self.steps += 1
        except Exception as error:  # fail the jobs in progress; the worker goes on
            log.exception("a continuous decoding step failed")
            for job in self.continuous.abort():
                job.future.set_exception(error)
        finally:
            self.decoding = 0

    def _join(self, jobs: list[Job]) -> None:
        for job in jobs:
            try:
                self._deliver(self.continuous.add(job))  # type: ignore[union-attr]
            except Exception as error:  # a job the decoder refuses fails alone
                log.exception("starting a job failed")
                job.future.set_exception(error)

    def _deliver(self, finished: list[tuple[Job, Any]]) -> None:
        for job, result in finished:
            self.jobs += 1
            job.future.set_result(result)

    def _take(self, jobs: list[Job]) -> None:
        """Remove ``jobs`` from the queue (the condition's lock is held)."""
        for job in jobs:
            self._pending.remove(job)
            self._waiting -= job.size

    def _run(self, batch: list[Job]) -> None:
        self.decoding = sum(job.size for job in batch)
        try:
            results = self.run(batch)
        except Exception as error:  # the server answers 500 and keeps serving
            log.exception("decoding a batch of %d job(s) failed", len(batch))
            for job in batch:
                job.future.set_exception(error)
            return
        finally:
            self.decoding = 0
        self.batches += 1
        self.jobs += len(batch)
        for job, result in zip(batch, results, strict=True):
            job.future.set_result(result)

    def _next_batch(self) -> list[Job] | None:
        """The oldest job and the waiting jobs that share its key, up to the token budget;
        waits up to ``max_wait`` after the oldest job for the budget to fill. None: closed and
        nothing left."""
        with self._condition:
            while not self._pending:
                if self._closed:
                    return None
                self._condition.wait()
            deadline = time.monotonic() + self.max_wait
            while True:
                batch, full = self._compatible()
                left = deadline - time.monotonic()
                if full or left <= 0 or self._closed or not self._company_expected():
                    break
                self._condition.wait(left)
            self._take(batch)
            return batch

    def _compatible(self) -> tuple[list[Job], bool]:
        """The oldest job and the jobs that may join it, and whether the batch is full (a
        job that shares its key did not fit the budget: waiting longer cannot help)."""
        first = self._pending[0]
        batch, cost, full = [first], first.cost, first.key is None
        for job in list(self._pending)[1:] if first.key is not None else ():
            if job.key != first.key:
                continue
            if cost + job.cost > self.max_batch_tokens:
                full = True
                continue
            batch.append(job)
            cost += job.cost
        return batch, full or cost >= self.max_batch_tokens
