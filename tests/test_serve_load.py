"""The server under concurrent load, over real loopback HTTP: requests are batched together
without changing any answer, the model works off the event loop, a full queue answers 429 at
once, a client that leaves does not block others, SIGTERM drains, and a bounded soak test of
mixed good and bad traffic."""

from __future__ import annotations

import asyncio
import random
import signal
import threading
import time

import httpx
import pytest

from seq2seq.inference.options import TranslateOptions
from tests.helpers import synthetic_pairs
from tests.serving import running_server

pytest.importorskip("fastapi")
pytestmark = [pytest.mark.slow, pytest.mark.serial]

SOURCES = [en for en, _ in synthetic_pairs()[::23]]  # 42 different sentences
HEAVY = ", ".join(["I will buy the book tomorrow and read it at home with you"] * 2)


def heavy(n: int) -> list[str]:
    """n long sentences, all different: a request's distinct sentences are decoded once."""
    return [f"{HEAVY}, {i}." for i in range(n)]


def decoding(url: str, request: threading.Thread) -> bool:
    """Wait until the server decodes (the worker has taken a batch) while ``request`` runs."""
    while request.is_alive():
        if httpx.get(url + "/v1/stats").json()["decoding_sentences"]:
            return True
        time.sleep(0.005)
    return False


def same_answer(answer: dict, alone: dict) -> bool:
    """The same answer as alone: every field equal, the confidence to float noise (a
    sentence's log-probability differs in its last bits with its batch-mates; its text never
    does)."""
    text = {k: v for k, v in answer.items() if k != "confidence"}
    if text != {k: v for k, v in alone.items() if k != "confidence"}:
        return False
    return answer.get("confidence") == pytest.approx(alone.get("confidence"), abs=2e-4)


def translate_body(q, **args) -> dict:
    return {"q": q, "source": "en", "target": "zh", **args}


async def concurrently(url: str, bodies: list[dict], timeout: float = 120) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:
        return await asyncio.gather(*(client.post("/translate", json=b) for b in bodies))


@pytest.mark.parametrize("alternatives", [0, 1])
def test_concurrent_requests_are_batched_and_every_answer_is_the_one_alone(
    translation_server, alternatives
):
    """Best translations at the server's beam join its continuous batch; n-best requests
    (alternatives) share whole batches. Either way each answer is the one given alone."""
    url = translation_server.url
    bodies = [translate_body(s, alternatives=alternatives) for s in SOURCES[:32]]
    alone = [httpx.post(url + "/translate", json=body, timeout=60).json() for body in bodies]
    before = httpx.get(url + "/v1/stats").json()
    answers = asyncio.run(concurrently(url, bodies))
    after = httpx.get(url + "/v1/stats").json()
    assert all(same_answer(a.json(), one) for a, one in zip(answers, alone, strict=True))
    change = {name: after[name] - before[name] for name in ("jobs", "batches", "steps")}
    assert change["jobs"] == 32
    if alternatives:
        assert 0 < change["batches"] < 32 and change["steps"] == 0  # requests shared a decode
    else:
        assert change["batches"] == 0 and change["steps"] > 0  # continuous batching


def test_greedy_requests_join_a_running_batch_and_get_their_greedy_answer(translation_checkpoint):
    """Continuous batching: sentences of concurrent greedy requests join and leave between
    decoder steps; every answer is greedy search's for that request alone."""
    from seq2seq.inference.translator import Translator

    translator = Translator.from_checkpoint(translation_checkpoint)
    rng = random.Random(5)
    requests = [rng.sample(SOURCES, rng.randrange(1, 4)) for _ in range(24)]
    with running_server(translation_checkpoint, "--beam-size", "1") as server:
        answers = asyncio.run(concurrently(server.url, [translate_body(q) for q in requests]))
        stats = httpx.get(server.url + "/v1/stats").json()
    assert [a.json()["translatedText"] for a in answers] == [
        translator.translate(q, TranslateOptions(beam_size=1)) for q in requests
    ]
    assert stats["jobs"] == 24 and stats["steps"] > 0 and stats["batches"] == 0


def test_health_is_answered_while_a_batch_decodes(translation_server):
    url = translation_server.url
    with httpx.Client(base_url=url, timeout=120) as http:
        busy = threading.Thread(
            target=http.post,
            args=("/translate",),
            kwargs={"json": translate_body(heavy(20), alternatives=4)},
        )
        busy.start()
        assert decoding(url, busy)
        health = httpx.get(url + "/health", timeout=5)
        stats = httpx.get(url + "/v1/stats", timeout=5).json()
        busy.join()
    assert health.json() == {"status": "ok"} and stats["decoding_sentences"] == 20


def test_a_full_queue_answers_429_at_once_and_the_rest_are_served(translation_checkpoint):
    options = (
        "--max-queue",
        "4",
        "--batch-limit",
        "4",
        "--max-wait-ms",
        "0",
        "--beam-size",
        "4",
        "--no-continuous",
    )
    with running_server(translation_checkpoint, *options) as server:
        expected = httpx.post(
            server.url + "/translate", json=translate_body(heavy(4)), timeout=120
        ).json()
        answers = asyncio.run(concurrently(server.url, [translate_body(heavy(4))] * 12))
        statuses = [a.status_code for a in answers]
        assert set(statuses) == {200, 429} and statuses.count(429) >= 6
        busy = next(a.json()["error"] for a in answers if a.status_code == 429)
        assert "server busy" in busy and "queue limit (4)" in busy
        assert all(a.json() == expected for a in answers if a.status_code == 200)
        assert httpx.get(server.url + "/health").json() == {"status": "ok"}


def test_clients_that_leave_while_queued_are_skipped(translation_checkpoint):
    # Whole batches: a job that joined a continuous batch is decoded even if its client left.
    with running_server(
        translation_checkpoint,
        "--max-wait-ms",
        "0",
        "--char-limit",
        "30000",
        "--beam-size",
        "4",
        "--no-continuous",
        "--no-verbatim",  # the heavy sentences' numbers would add an alignment job
    ) as server:
        url = server.url
        with httpx.Client(base_url=url, timeout=120) as http:
            first = threading.Thread(
                target=http.post,
                args=("/translate",),
                kwargs={"json": translate_body(heavy(160))},
            )
            first.start()
            assert decoding(url, first)
            for _ in range(3):  # queued behind the first, then gone
                with pytest.raises(httpx.TimeoutException):
                    httpx.post(url + "/translate", json=translate_body(heavy(6)), timeout=0.3)
            # The server looks for gone clients every 0.5 s and logs each with a 499: wait
            # for the three (the worker counts them when it reaches them, after the first).
            deadline = time.monotonic() + 10
            while first.is_alive() and time.monotonic() < deadline:
                if sum(" 499 " in line for line in server.log) == 3:
                    break
                time.sleep(0.05)
            assert first.is_alive(), "make the first request longer: it ended too soon"
            first.join()
            assert http.post("/translate", json=translate_body("Hello.")).status_code == 200
            stats = http.get("/v1/stats").json()
        assert (stats["cancelled"], stats["jobs"]) == (3, 2)  # decoded: the first and Hello
        assert sum(" 499 " in line for line in server.log) == 3


def test_sigterm_finishes_requests_in_flight_then_exits_0(translation_checkpoint):
    with running_server(translation_checkpoint) as server:
        expected = httpx.post(
            server.url + "/translate", json=translate_body(heavy(4)), timeout=120
        ).json()
        answers: list[httpx.Response] = []
        in_flight = threading.Thread(
            target=lambda: answers.append(
                httpx.post(server.url + "/translate", json=translate_body(heavy(4)), timeout=120)
            )
        )
        in_flight.start()
        assert decoding(server.url, in_flight)
        assert in_flight.is_alive()
        server.process.send_signal(signal.SIGTERM)
        in_flight.join(120)
        assert server.process.wait(60) == 0
        assert answers[0].status_code == 200 and answers[0].json() == expected
        with pytest.raises(httpx.ConnectError):
            httpx.get(server.url + "/health")


def test_soak_mixed_good_and_bad_traffic(translation_server):
    """8 clients for 6 seconds: good requests (checked against the answers alone) mixed with
    malformed, invalid and odd ones; never a 500, and healthy at the end."""
    url = translation_server.url
    expected = {
        s: httpx.post(url + "/translate", json=translate_body(s), timeout=60).json()
        for s in SOURCES[:16]
    }
    bad = [
        {"content": b'{"q": ', "headers": {"content-type": "application/json"}},
        {"json": {"q": "a", "source": "en", "target": "xx"}},
        {"json": {"source": "en", "target": "zh"}},
        {"json": {"q": "x" * 30001, "source": "en", "target": "zh"}},
        {
            "content": b"q=%FF%FE&source=en&target=zh",
            "headers": {"content-type": "application/x-www-form-urlencoded"},
        },
        {"json": translate_body(["", "🍎 \x00", "\n\n"])},
    ]
    statuses: dict[int, int] = {}
    wrong: list[str] = []

    async def client(seed: int, stop: float) -> int:
        rng, sent = random.Random(seed), 0
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            while time.monotonic() < stop:
                if rng.random() < 0.7:
                    source = rng.choice(SOURCES[:16])
                    response = await http.post("/translate", json=translate_body(source))
                    answer = response.json() if response.status_code == 200 else None
                    if answer is not None and not same_answer(answer, expected[source]):
                        wrong.append(source)
                else:
                    response = await http.post("/translate", **rng.choice(bad))
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                sent += 1
        return sent

    async def soak() -> list[int]:
        stop = time.monotonic() + 6
        return await asyncio.gather(*(client(seed, stop) for seed in range(8)))

    sent = asyncio.run(soak())
    print(f"soak: {sum(sent)} requests from 8 clients in 12 s, statuses {statuses}")  # -s shows it
    assert min(sent) > 0 and wrong == []
    assert set(statuses) <= {200, 400} and statuses.get(200) and statuses.get(400)
    assert httpx.get(url + "/health").json() == {"status": "ok"}
