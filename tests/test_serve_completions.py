"""The OpenAI-compatible completions API of a decoder-only language model, through the
``openai`` client from PyPI pointed at the server: plain and streamed, several prompts and
samples, seeds, stop strings, and OpenAI-shaped errors."""

from __future__ import annotations

import httpx
import pytest

from seq2seq.decoding.sampling import SamplingConfig
from seq2seq.inference.generation import Generator

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
pytestmark = [pytest.mark.slow, pytest.mark.serial]


@pytest.fixture(scope="module")
def client(lm_server):
    return openai.OpenAI(base_url=lm_server.url + "/v1", api_key="unused", max_retries=0)


def test_models_lists_the_served_model(client):
    assert [model.id for model in client.models.list()] == ["tiny-lm"]


def test_a_greedy_completion_is_the_generators(client, lm_checkpoint):
    answer = client.completions.create(
        model="tiny-lm", prompt="We will", max_tokens=12, temperature=0
    )
    [expected] = Generator.from_checkpoint(lm_checkpoint).complete(
        ["We will"], 12, SamplingConfig(temperature=0.0)
    )
    [choice] = answer.choices
    assert (choice.text, choice.finish_reason, choice.index) == (
        expected.text,
        expected.finish_reason,
        0,
    )
    assert answer.object == "text_completion" and answer.model == "tiny-lm"
    assert answer.usage.prompt_tokens == expected.prompt_tokens
    assert answer.usage.completion_tokens == expected.completion_tokens
    assert answer.usage.total_tokens == expected.prompt_tokens + expected.completion_tokens


def test_streaming_gives_the_same_text_piece_by_piece(client):
    options = dict(
        model="tiny-lm",
        prompt=["I can", "You"],
        max_tokens=10,
        n=2,
        seed=7,
        temperature=0.8,
        top_p=0.9,
    )
    plain = client.completions.create(**options)
    pieces: dict[int, list[str]] = {}
    reasons: dict[int, str] = {}
    for chunk in client.completions.create(stream=True, **options):
        [choice] = chunk.choices
        pieces.setdefault(choice.index, []).append(choice.text)
        if choice.finish_reason is not None:
            reasons[choice.index] = choice.finish_reason
    assert [c.index for c in plain.choices] == [0, 1, 2, 3]  # prompt by prompt, n each
    assert {i: "".join(p) for i, p in pieces.items()} == {c.index: c.text for c in plain.choices}
    assert reasons == {c.index: c.finish_reason for c in plain.choices}
    assert max(len(p) for p in pieces.values()) > 2  # really streamed, not one chunk
    again = client.completions.create(**options)
    assert [c.text for c in again.choices] == [c.text for c in plain.choices]  # seeded


def test_the_stream_is_server_sent_events_ending_with_done(lm_server):
    body = {"prompt": "I", "max_tokens": 5, "temperature": 0, "stream": True}
    with httpx.stream("POST", lm_server.url + "/v1/completions", json=body, timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"


def test_stop_strings_end_a_completion(client):
    options = dict(model="tiny-lm", prompt="He", max_tokens=16, seed=3)
    full = client.completions.create(**options).choices[0].text
    # A two-character stop string that first occurs inside the text, not at its start.
    start = next(i for i in range(1, len(full) - 1) if full.find(full[i : i + 2]) == i)
    stop = full[start : start + 2]
    cut = client.completions.create(stop=[stop], **options).choices[0]
    assert (cut.text, cut.finish_reason) == (full[:start], "stop")
    streamed = client.completions.create(stop=stop, stream=True, **options)
    assert "".join(chunk.choices[0].text for chunk in streamed) == full[:start]


def test_an_empty_stop_string_stops_nothing(client):
    options = dict(model="tiny-lm", prompt="He", max_tokens=8, seed=3)
    full = client.completions.create(**options).choices[0].text
    assert client.completions.create(stop="", **options).choices[0].text == full


def test_errors_are_openai_shaped(client, lm_server, translation_server):
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.completions.create(model="gpt-4", prompt="a")
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="tiny-lm", prompt="a", top_p=0)
    assert caught.value.body["type"] == "invalid_request_error"
    assert "top_p" in caught.value.body["message"]
    translator = openai.OpenAI(base_url=translation_server.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="is a translation model"):
        translator.completions.create(model="translator", prompt="a")
    answer = httpx.post(
        lm_server.url + "/translate", json={"q": "a", "source": "en", "target": "zh"}
    )
    assert answer.status_code == 400 and "language model" in answer.json()["error"]
    assert httpx.get(lm_server.url + "/languages").json() == []
    wrong = httpx.get(lm_server.url + "/v1/completions")
    assert wrong.status_code == 405 and wrong.json()["error"]["message"] == "Method Not Allowed"
