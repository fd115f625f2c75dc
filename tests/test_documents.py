"""Text, not only sentences: lines split into sentences and joined again, every distinct
sentence decoded once, over-long sentences translated in pieces (never cut), and documents'
markup put back by the model's alignment (a copying engine shows where tags go)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch

from seq2seq.decoding.search import Hypothesis, SearchConfig
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.helpers import tiny_checkpoint

SENTENCES = ["I will buy apples today.", "She can see the book tomorrow.", "We should eat."]


@pytest.fixture(scope="module")
def translator(tmp_path_factory) -> Translator:
    return Translator.from_checkpoint(tiny_checkpoint(tmp_path_factory.mktemp("doc") / "t.ckpt"))


class Counting:
    """An engine that records what it decodes, around a real one."""

    def __init__(self, engine, limit: int | None = None) -> None:
        self.engine, self.limit, self.decoded = engine, limit, []
        self.search, self.device = engine.search, engine.device

    def hypotheses(self, sources, beam_size, n_best=1):
        self.decoded += sources
        return self.engine.hypotheses(sources, beam_size, n_best)

    def source_limit(self):
        return self.limit or self.engine.source_limit()

    def batch_budget(self, max_tokens, beam_size):
        return self.engine.batch_budget(max_tokens, beam_size)

    def attention(self, source, target):
        return self.engine.attention(source, target)


def test_a_line_of_sentences_is_its_sentences_translated_and_joined(translator):
    alone = translator.translate(SENTENCES, TranslateOptions(beam_size=2))
    [together] = translator.translate([" ".join(SENTENCES)], TranslateOptions(beam_size=2))
    assert together == "".join(alone)


def test_a_one_sentence_line_is_the_same_with_and_without_splitting(translator):
    lines = ["I will buy apples today.", "Mr. Lee can see the U.S. map."]
    split = translator.translate(lines, TranslateOptions(beam_size=2))
    assert split == translator.translate(lines, TranslateOptions(beam_size=2, split=False))


def test_one_output_line_per_input_line_and_each_distinct_sentence_decoded_once(translator):
    counting = Translator(Counting(translator.engine), translator.tokenizer)
    lines = [SENTENCES[0], "", f"{SENTENCES[0]} {SENTENCES[1]}\r", "   ", SENTENCES[1]] * 3
    out = counting.translate(lines, TranslateOptions(beam_size=1))
    assert len(out) == len(lines) and out[1] == out[3] == "" and "\n" not in "".join(out)
    assert len(counting.engine.decoded) == 2  # two distinct sentences in 15 lines
    assert out[2] == out[0] + out[4]


def test_an_over_long_sentence_is_translated_in_pieces_never_cut(translator, capsys):
    clauses = "I will buy apples today, she can see the book tomorrow, we should eat fish"
    limit = max(len(translator.encode_sentence(c)) for c in clauses.split(", ")) + 2
    counting = Translator(Counting(translator.engine, limit), translator.tokenizer)
    windowless = " ".join(["apples"] * 40)
    out = counting.translate([clauses, windowless], TranslateOptions(beam_size=1))
    assert all(out) and all(len(ids) <= limit for ids in counting.engine.decoded)
    pieces = [translator.tokenizer.decode(ids) for ids in counting.engine.decoded]
    assert sum(p.count("apples") for p in pieces) == 41  # every word decoded, none cut off
    err = capsys.readouterr().err
    assert "translated in windows, not as a whole: line 2" in err and "line 1," not in err


class CopyEngine:
    """'Translates' a source into itself, attending to the same position: an identity whose
    alignment is known, to see markup go where its words went."""

    search, device = SearchConfig(), "cpu"

    def hypotheses(self, sources, beam_size, n_best=1):
        return [[Hypothesis(list(ids), 0.0, 0.0)] for ids in sources]

    def source_limit(self):
        return 256

    def batch_budget(self, max_tokens, beam_size):
        return max_tokens

    def attention(self, source, target):
        weights = torch.zeros(len(target) + 1, len(source))
        for t in range(len(target) + 1):
            weights[t, min(t, len(source) - 1)] = 1.0
        return weights


@pytest.fixture(scope="module")
def copying(translator) -> Translator:
    return Translator(CopyEngine(), translator.tokenizer)


def test_html_tags_go_around_the_words_they_wrapped(copying):
    page = '<p>I will <b>buy apples</b> today. She can <a href="/b">see</a> the book.</p>'
    [out] = copying.translate([page], TranslateOptions(format="html"))
    # The copy is the sentences joined with no space, as Chinese is; tags where they were.
    assert out == '<p>I will <b>buy apples</b> today.She can <a href="/b">see</a> the book.</p>'


def test_html_untouched_parts_and_entities(copying):
    page = (
        "<p>We &amp; she <code>x&lt;y</code> eat.</p><pre>we &nbsp; eat</pre>"
        '<p translate="no">we eat</p><script>var a = "we eat";</script>'
    )
    [out] = copying.translate([page], TranslateOptions(format="html"))
    assert out.startswith("<p>We &amp; she <code>x&lt;y</code> eat.</p>")
    assert out.endswith(
        '<pre>we &nbsp; eat</pre><p translate="no">we eat</p><script>var a = "we eat";</script>'
    )


def test_markdown_and_srt_through_the_translator(copying):
    [md] = copying.translate(
        ["# We eat.\n\n- I will **buy apples** today.\n\n```\nwe\n```\n"],
        TranslateOptions(format="markdown"),
    )
    assert md == "# We eat.\n\n- I will **buy apples** today.\n\n```\nwe\n```\n"
    srt = "1\n00:00:01,000 --> 00:00:02,000\nWe should\n<i>eat.</i>\n"
    [out] = copying.translate([srt], TranslateOptions(format="srt"))
    assert out == "1\n00:00:01,000 --> 00:00:02,000\nWe should <i>eat.</i>\n"


class Together(Counting):
    """``Counting`` with the real engine's ``attentions``, recording each call's pairs."""

    def __init__(self, engine) -> None:
        super().__init__(engine)
        self.together, self.alone = [], 0

    def attentions(self, pairs):
        self.together.append(len(pairs))
        return self.engine.attentions(pairs)

    def attention(self, source, target):
        self.alone += 1
        return self.engine.attention(source, target)


def test_markup_is_placed_by_attention_computed_together_as_one_by_one(translator):
    """The alignments of a document's sentences are computed in one call of padded passes,
    not a forward pass per sentence, and place the markup exactly where one by one does."""
    pages = [
        "<p>I will <b>buy apples</b> today. She can see the book.</p>",
        "<p>We <i>should</i> eat. Mr. Lee can see <a href='/m'>the U.S. map</a>.</p>",
    ]
    options = TranslateOptions(format="html", beam_size=2)
    together = Together(translator.engine)
    batched = Translator(together, translator.tokenizer).translate(pages, options)
    alone = Translator(Counting(translator.engine), translator.tokenizer).translate(pages, options)
    assert batched == alone and "</b>" in batched[0] and "href='/m'" in batched[1]
    # One call, for the three sentences an element begins or ends in ("She can see the
    # book." has none: its translation goes where its words were, no attention needed).
    assert together.together == [3] and together.alone == 0


def test_only_sentences_an_element_begins_ends_or_stands_in_are_aligned():
    from seq2seq.formats import parse
    from seq2seq.inference.documents import TextBatch

    page = (
        "<p>I <b>will</b> eat. <i>We should eat.</i> You can see.</p>"
        "<p>Read <code>x</code> now. Go<br>home.</p>"
    )
    batch = TextBatch([parse(page, "html")])
    flags = dict(zip(batch.sentences, batch.aligned, strict=True))
    assert flags["I will eat."] is True and flags["Read x now."] is True
    # Wrapped whole, no markup, or a <br> between sentences: no verbatim span to check either.
    for sentence in ("We should eat.", "You can see.", "Go", "home."):
        assert flags[sentence] == ()


def test_documents_decode_their_distinct_sentences_in_one_pass(translator):
    counting = Translator(Counting(translator.engine), translator.tokenizer)
    pages = [f"<p>{SENTENCES[0]} <b>{SENTENCES[1]}</b></p>", f"<h1>{SENTENCES[1]}</h1>"]
    out = counting.translate(pages, TranslateOptions(beam_size=1, format="html"))
    assert len(counting.engine.decoded) == 2
    assert [re.sub("<[^>]+>", "", o) for o in out] == [
        "".join(translator.translate(SENTENCES[:2], TranslateOptions(beam_size=1))),
        translator.translate(SENTENCES[1:2], TranslateOptions(beam_size=1))[0],
    ]


def test_n_best_of_a_sentence_in_pieces_joins_the_pieces(translator):
    sentence = "I will buy apples today, she can see the book tomorrow"
    limit = max(len(translator.encode_sentence(c)) for c in sentence.split(", ")) + 1
    counting = Translator(Counting(translator.engine, limit), translator.tokenizer)
    [found] = counting.translate_sentences([sentence], TranslateOptions(beam_size=3, n_best=2))
    assert found.pieces == 2 and not found.windowed and len(found.texts) == 2
    firsts = counting.translate(
        ["I will buy apples today,", "she can see the book tomorrow"],
        TranslateOptions(beam_size=3, split=False),
    )
    assert found.texts[0] == "".join(firsts)
    assert replace(found, texts=[]).hypotheses[0].tokens == [
        t for h in found.hypotheses[:1] for t in h.tokens
    ]


def test_best_combinations_are_the_top_sums_in_order():
    import itertools
    import random

    from seq2seq.inference.documents import best_combinations

    rng = random.Random(0)
    for _ in range(200):
        lists = [
            sorted((rng.random() for _ in range(rng.randint(1, 4))), reverse=True)
            for _ in range(rng.randint(1, 4))
        ]
        n = rng.randint(1, 8)
        got = best_combinations(lists, n)

        def total(choice, lists=lists):
            return sum(scores[i] for scores, i in zip(lists, choice, strict=True))

        every = sorted(itertools.product(*(range(len(s)) for s in lists)), key=total, reverse=True)
        assert len(set(got)) == len(got) == min(n, len(every))
        assert [total(c) for c in got] == pytest.approx([total(c) for c in every[:n]])
