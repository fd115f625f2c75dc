"""The batching worker alone (no HTTP, no model): what it batches together, its queue bound,
cancellation, failures and shutdown."""

from __future__ import annotations

import threading
import time

import pytest

from seq2seq.serve.worker import BatchingWorker, Job, QueueFull, WorkerClosed


class Recorder:
    """A ``run`` that records its batches; ``gate`` holds the first batch until released."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.fail_on = fail_on

    def __call__(self, jobs):
        self.started.set()
        self.gate.wait(10)
        names = [job.payload for job in jobs]
        self.batches.append(names)
        if self.fail_on in names:
            raise RuntimeError(f"cannot decode {self.fail_on}")
        return [name.upper() for name in names]


def job(name: str, key="k", size: int = 1, cost: int = 10) -> Job:
    return Job(key=key, size=size, cost=cost, payload=name)


def blocked_worker(run: Recorder, **options) -> BatchingWorker:
    """A worker busy with a first job, so that the next ones queue up behind it."""
    settings = {"max_batch_tokens": 100, "max_wait": 0.0, "max_queue": 100, **options}
    worker = BatchingWorker(run, **settings).start()
    run.gate.clear()
    worker.submit(job("first"))
    assert run.started.wait(5)
    return worker


def test_waiting_jobs_with_the_same_key_share_a_batch_and_others_wait_their_turn():
    run = Recorder()
    worker = blocked_worker(run)
    futures = [
        worker.submit(job(name, key))
        for name, key in [
            ("a", "greedy"),
            ("b", "beam"),
            ("c", "greedy"),
            ("d", None),
            ("e", "greedy"),
        ]
    ]
    run.gate.set()
    assert [f.result(5) for f in futures] == ["A", "B", "C", "D", "E"]
    worker.close()
    assert run.batches == [["first"], ["a", "c", "e"], ["b"], ["d"]]  # None: always alone


def test_a_batch_stops_at_the_token_budget():
    run = Recorder()
    worker = blocked_worker(run, max_batch_tokens=25)
    futures = [worker.submit(job(name, cost=10)) for name in "abcde"]
    run.gate.set()
    [f.result(5) for f in futures]
    worker.close()
    assert run.batches[1:] == [["a", "b"], ["c", "d"], ["e"]]


def test_the_worker_waits_up_to_max_wait_for_company():
    run = Recorder()
    worker = BatchingWorker(run, max_batch_tokens=100, max_wait=0.5, max_queue=100).start()
    first = worker.submit(job("a"))
    time.sleep(0.05)
    second = worker.submit(job("b"))
    assert (first.result(5), second.result(5)) == ("A", "B")
    worker.close()
    assert run.batches == [["a", "b"]]


def test_waiting_for_arrivals_a_lone_request_never_waits_for_company():
    run = Recorder()
    worker = BatchingWorker(run, 100, max_wait=30.0, max_queue=100, wait_for_arrivals=True)
    worker.start()
    worker.request_started()  # the request whose job this is
    start = time.monotonic()
    assert worker.submit(job("alone")).result(5) == "ALONE"
    assert time.monotonic() - start < 5  # not the 30 s window
    worker.request_ended()
    worker.close()


def test_waiting_for_arrivals_the_worker_waits_for_a_received_request_and_no_longer():
    run = Recorder()
    worker = BatchingWorker(run, 100, max_wait=30.0, max_queue=100, wait_for_arrivals=True)
    worker.start()
    worker.request_started(), worker.request_started()  # two requests arrived
    first = worker.submit(job("a"))
    time.sleep(0.2)  # the second is still being read: the first waits for it
    assert not first.done()
    start = time.monotonic()
    second = worker.submit(job("b"))  # nobody else in flight: decoded at once, together
    assert (first.result(5), second.result(5)) == ("A", "B")
    assert time.monotonic() - start < 5
    assert run.batches == [["a", "b"]]
    worker.request_ended(), worker.request_ended()
    # A request that queues no job (it failed, or its job is done) stops the wait too.
    worker.request_started(), worker.request_started(), worker.request_started()
    third = worker.submit(job("c"))
    time.sleep(0.2)
    assert not third.done()
    worker.request_ended()  # one of the others answered without a job
    worker.request_ended()
    assert third.result(5) == "C"
    worker.close()


def test_a_full_queue_refuses_at_once_but_a_lone_big_job_is_taken():
    run = Recorder()
    worker = blocked_worker(run, max_queue=3)
    worker.submit(job("a", size=2))
    with pytest.raises(QueueFull, match=r"2 sentences waiting, 2 more .*limit \(3\)"):
        worker.submit(job("b", size=2))
    assert worker.waiting == 2
    run.gate.set()
    worker.close()
    alone = BatchingWorker(Recorder(), 100, 0.0, max_queue=3).start()
    assert alone.submit(job("big", size=50)).result(5) == "BIG"
    alone.close()


def test_a_cancelled_job_is_skipped():
    run = Recorder()
    worker = blocked_worker(run)
    gone, kept = worker.submit(job("gone")), worker.submit(job("kept"))
    assert gone.cancel()
    run.gate.set()
    assert kept.result(5) == "KEPT"
    worker.close()
    assert ["gone"] not in run.batches and all("gone" not in b for b in run.batches)


def test_a_failing_batch_fails_its_jobs_and_the_worker_goes_on():
    run = Recorder(fail_on="bad")
    worker = blocked_worker(run)
    bad, also = worker.submit(job("bad")), worker.submit(job("also"))
    run.gate.set()
    with pytest.raises(RuntimeError, match="cannot decode bad"):
        bad.result(5)
    with pytest.raises(RuntimeError):
        also.result(5)  # it shared the batch
    assert worker.submit(job("later")).result(5) == "LATER"
    assert worker.alive
    worker.close()


def test_close_finishes_queued_jobs_then_refuses_new_ones():
    run = Recorder()
    worker = blocked_worker(run)
    queued = worker.submit(job("queued"))
    closing = threading.Thread(target=worker.close)
    closing.start()
    run.gate.set()
    closing.join(5)
    assert queued.result(0) == "QUEUED"
    assert not worker.alive
    with pytest.raises(WorkerClosed):
        worker.submit(job("late"))


class FakeContinuous:
    """A continuous decoder for jobs keyed "c": each job takes ``payload`` steps; a job named
    "boom" makes the step it is in fail."""

    def __init__(self) -> None:
        self.left: dict[int, list] = {}
        self.steps = 0

    @property
    def active(self) -> int:
        return len(self.left)

    def accepts(self, job) -> bool:
        return job.key == "c"

    def has_room(self, cost: int) -> bool:
        return True

    def add(self, job):
        self.left[id(job)] = [job, len(job.payload)]
        return []

    def step(self):
        self.steps += 1
        if any(job.payload == "boom" for job, _ in self.left.values()):
            raise RuntimeError("step failed")
        done = []
        for key, entry in list(self.left.items()):
            entry[1] -= 1
            if entry[1] == 0:
                done.append((entry[0], entry[0].payload.upper()))
                del self.left[key]
        return done

    def abort(self):
        jobs = [job for job, _ in self.left.values()]
        self.left.clear()
        return jobs


def test_continuous_jobs_step_while_other_jobs_run_between_steps():
    run, continuous = Recorder(), FakeContinuous()
    worker = BatchingWorker(run, 100, 0.0, 100, continuous=continuous).start()
    long = worker.submit(job("aaaaaaaaaaaaaaaaaaaa", key="c"))  # 20 steps
    short = worker.submit(job("bb", key="c"))
    whole = worker.submit(job("w", key="k"))  # not for the continuous decoder
    assert (short.result(5), whole.result(5), long.result(5)) == ("BB", "W", "A" * 20)
    assert run.batches == [["w"]] and continuous.steps >= 20
    failing = worker.submit(job("boom", key="c"))
    with pytest.raises(RuntimeError, match="step failed"):
        failing.result(5)
    assert worker.submit(job("ok", key="c")).result(5) == "OK" and worker.alive
    worker.close()


def test_a_full_queue_first_drops_the_jobs_whose_clients_left():
    run = Recorder()
    worker = blocked_worker(run, max_queue=3)
    gone = worker.submit(job("gone", size=2))
    gone.cancel()
    kept = worker.submit(job("kept", size=2))  # fits once the cancelled job is dropped
    run.gate.set()
    assert kept.result(5) == "KEPT"
    worker.close()
    assert worker.cancelled == 1 and all("gone" not in b for b in run.batches)
