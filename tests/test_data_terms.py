"""Term annotation (seq2seq.data.terms): the source format, tags placed by id only and never
generated, and glossaries annotating a term-trained model's sources."""

from dataclasses import replace

import pytest
import torch

from seq2seq.data.terms import (
    TERM_TAGS,
    TermSpan,
    annotated_source_ids,
    find_span,
    find_term,
    find_terms,
    term_pieces,
    term_table,
    term_tag_ids,
    unrelated_word,
)
from seq2seq.decoding.decode import TransformerScorer
from seq2seq.decoding.search import written_lengths
from seq2seq.inference.glossary import Glossary
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.helpers import tiny_checkpoint


@pytest.fixture(scope="module")
def term_model(tmp_path_factory):
    path = tiny_checkpoint(
        tmp_path_factory.mktemp("terms") / "t.ckpt", seed=2, terms=True, source_ends_with_eos=True
    )
    return Translator.from_checkpoint(path)


@pytest.fixture(scope="module")
def plain_model(tmp_path_factory):
    path = tiny_checkpoint(
        tmp_path_factory.mktemp("plain") / "p.ckpt", seed=2, source_ends_with_eos=True
    )
    return Translator.from_checkpoint(path)


def test_a_vocabulary_without_the_tags_has_none_whatever_its_unknown_id():
    class MarianLike:  # an imported model: its unknown piece is 3, and 1 is a real piece
        unk_id = 3

        def __init__(self, pieces: dict[str, int]) -> None:
            self.pieces = pieces

        def piece_to_id(self, piece: str) -> int:
            return self.pieces.get(piece, self.unk_id)

    assert term_tag_ids(MarianLike({})) is None
    tagged = MarianLike({tag: 10 + i for i, tag in enumerate(TERM_TAGS)})
    assert term_tag_ids(tagged) == (10, 11, 12)


def test_the_annotation_is_text_and_tags_by_id(term_model):
    tokenizer = term_model.tokenizer
    start, trans, end = term_tag_ids(tokenizer)
    text = "My teacher will buy apples."
    ids = annotated_source_ids(tokenizer, text, [TermSpan(3, 10, "导师")])
    assert ids.count(start) == ids.count(trans) == ids.count(end) == 1
    assert tokenizer.decode(ids[: ids.index(start)]) == "My"
    assert tokenizer.decode(ids[ids.index(start) + 1 : ids.index(trans)]) == "teacher"
    assert tokenizer.decode(ids[ids.index(trans) + 1 : ids.index(end)]) == "导师"
    # The term's pieces are those a sentence spells it with: no bare "▁" first.
    term = [tokenizer.id_to_piece(t) for t in ids[ids.index(trans) + 1 : ids.index(end)]]
    assert tokenizer.id_to_piece(tokenizer.encode("导师")[0]) == "\u2581" and term[0] != "\u2581"
    assert term == [tokenizer.id_to_piece(t) for t in term_pieces(tokenizer, "导师")]
    assert ids[-1] == tokenizer.eos_id  # sources end with eos, as encode_source ends them
    # Without spans it is exactly encode_source; a user's "<term>" is never a tag.
    assert annotated_source_ids(tokenizer, text, []) == tokenizer.encode_source(text)
    literal = tokenizer.encode_source(f"I typed {TERM_TAGS[0]} here")
    assert not set(literal) & {start, trans, end}


def test_the_length_limit_counts_the_source_without_its_annotation(term_model, monkeypatch):
    tokenizer, pad = term_model.tokenizer, term_model.engine.model.config.pad_id
    start, trans, end = tags = term_tag_ids(tokenizer)
    text = "My teacher and my friend will buy apples."
    plain = tokenizer.encode_source(text)
    spans = [TermSpan(3, 10, "导师"), TermSpan(18, 24, "友人")]
    annotated = annotated_source_ids(tokenizer, text, spans)
    assert len(annotated) > len(plain) + 6  # two annotations: three tags and a term each
    rows = [annotated, plain, [pad] * 3 + annotated]  # padded on either side
    width = max(map(len, rows))
    ids = torch.tensor([row + [pad] * (width - len(row)) for row in rows])
    assert written_lengths(ids, pad, tags).tolist() == [len(plain)] * 3
    assert written_lengths(ids, pad).tolist() == [len(annotated), len(plain), len(annotated)]
    # A tag alone, unclosed or closing nothing, is left out and leaves the rest counted.
    odd = torch.tensor([[7, start, 8, end, 9, pad], [7, trans, 8, 9, pad, pad]])
    assert written_lengths(odd, pad, tags).tolist() == [3, 1]
    # The searches' cache is sized by the limit: with a glossary, as without it.
    sizes = []
    real_init = TransformerScorer.__init__

    def init(self, model, src_ids, beam_size, max_len, *rest):  # noqa: ANN001, ANN002, ANN202
        sizes.append(max_len)
        real_init(self, model, src_ids, beam_size, max_len, *rest)

    monkeypatch.setattr(TransformerScorer, "__init__", init)
    glossary = Glossary.parse("teacher\t导师\nfriend\t友人\n")
    for used in (None, glossary):
        term_model.translate([text], TranslateOptions(beam_size=2, glossary=used))
    assert len(sizes) == 2 and sizes[0] == sizes[1]


def test_terms_are_found_on_both_sides_and_mostly_swapped_for_a_synonym():
    assert find_span("My Teacher's car", "teacher") == (3, 10)
    assert find_span("My teachers", "teacher") is None  # whole words only
    kept = find_term("My teacher is kind.", "我的老师很好。", pick=0.0, swap=0.95)
    assert kept == ("我的老师很好。", TermSpan(3, 10, "老师"))
    zh, span = find_term("My teacher is kind.", "我的老师很好。", pick=0.0, swap=0.1)
    assert span.target != "老师" and zh == "我的" + span.target + "很好。"
    assert find_term("My teacher is kind.", "他很好。", 0.0, 0.95) is None  # not in the reference


def test_several_terms_of_a_pair_are_annotated_apart():
    en, zh = "My teacher's friend bought a computer.", "我老师的朋友买了一台电脑。"
    one = find_term(en, zh, 0.9, 0.1)
    assert find_terms(en, zh, [0.9], [0.1]) == (one[0], [one[1]])  # one draw: one term
    kept, spans = find_terms(en, zh, [0.0] * 5, [0.95] * 5)  # every term, none swapped
    assert kept == zh and [en[s.start : s.end] for s in spans] == ["teacher", "friend", "computer"]
    assert [s.target for s in spans] == ["老师", "朋友", "电脑"]
    # Two draws: "computer" (swapped for a synonym), then one of the two terms left.
    swapped, spans = find_terms(en, zh, [0.9, 0.0], [0.1, 0.3])
    assert [en[s.start : s.end] for s in spans] == ["teacher", "computer"]
    assert spans[1].target not in zh and swapped == "我教师的朋友买了一台计算机。"
    assert all(
        a.end <= b.start for a, b in zip(spans, spans[1:], strict=False)
    )  # apart, in source order
    # A word twice: each term claims its own occurrence in the reference (the second finds
    # no synonym left: 公车 is the only one of 公共汽车's sense).
    assert find_terms(
        "My bus, my bus!", "我的公共汽车，我的公共汽车！", [0.0, 0.0], [0.3, 0.1]
    ) == (
        "我的公车，我的公共汽车！",
        [TermSpan(3, 6, "公车"), TermSpan(11, 14, "公共汽车")],
    )


def test_an_unrelated_word_in_place_of_the_term_leaves_only_copying():
    en, zh = "My teacher is kind.", "我的老师很好。"
    synonyms = term_table(None)[("teacher",)]
    swapped, [span] = find_terms(en, zh, [0.0], [0.1], unrelated=1.0)
    assert span.target not in synonyms and span.target not in zh and len(span.target) > 1
    assert swapped == zh.replace("老师", span.target)
    # Another draw, another word; above the swap share the reference's word stays.
    assert find_terms(en, zh, [0.0], [0.5], unrelated=1.0)[1][0].target != span.target
    assert find_terms(en, zh, [0.0], [0.95], unrelated=1.0) == (zh, [TermSpan(3, 10, "老师")])
    # Two terms never get the same word, whatever the draws.
    en2, zh2 = "The room has lots of space.", "房间的空间很大。"
    for first in (0.0, 0.2, 0.4, 0.6):
        for second in (0.0, 0.2, 0.4, 0.6):
            for unrelated in (0.0, 1.0):
                out, spans = find_terms(en2, zh2, [0.0, 0.0], [first, second], unrelated=unrelated)
                assert len(spans) == 2 and spans[0].target != spans[1].target
                assert out.count(spans[0].target) == out.count(spans[1].target) == 1
    assert unrelated_word(0.0, "", avoid=[unrelated_word(0.0, "")]) != unrelated_word(0.0, "")
    # With half the swaps unrelated, the other half still take a synonym.
    _, [half] = find_terms(en, zh, [0.0], [0.7], unrelated=0.5)
    assert half.target in synonyms and half.target != "老师"
    assert unrelated_word(0.0, "") != unrelated_word(0.0, unrelated_word(0.0, ""))  # not in zh


def test_a_glossary_is_annotated_for_a_term_model_and_its_tags_never_come_out(term_model):
    glossary = Glossary.parse("teacher\t导师\n")
    sentence = "My teacher will buy apples today."
    plans = term_model.plan([sentence])
    terms = term_model.piece_terms([sentence], plans, glossary)
    from seq2seq.inference.glossary import annotate_pieces

    limit = term_model.engine.source_limit()
    [ids] = annotate_pieces(
        term_model.tokenizer, [sentence], plans, terms, term_model.truecaser, limit
    )
    assert term_tag_ids(term_model.tokenizer)[0] in ids and ids != plans[0][0].ids
    # Constrained search stays on: the term is met even by an untrained model.
    [out] = term_model.translate([sentence], TranslateOptions(beam_size=2, glossary=glossary))
    assert "导师" in out
    tags = set(term_tag_ids(term_model.tokenizer))
    for found in term_model.translate_n_best(
        [sentence, "Tom will buy rice."], TranslateOptions(n_best=2)
    ):
        for hyp in found:
            assert not tags & set(hyp.tokens)


def test_annotation_only_skips_the_constrained_search(term_model):
    glossary = Glossary.parse("teacher\t导师\n")
    sentence = "My teacher will buy apples today."
    term_model.constrain_terms = False
    try:
        terms = term_model.piece_terms([sentence], term_model.plan([sentence]), glossary)
        assert term_model.constraints(terms) is None
    finally:
        term_model.constrain_terms = True
    assert term_model.constraints(terms) is not None


def test_the_server_annotates_a_glossary_as_the_python_api_does(term_model):
    """LibreTranslate's, our own and DeepL's routes (its stored glossary, HTML) encode a
    request's glossary terms into the source as ``Translator.translate`` does, with and without
    ``--glossary-annotation-only`` (whose requests then decode in the continuous batch, as plain
    ones do); the server's setting is its own, not the ``Translator``'s it was given."""
    httpx = pytest.importorskip("httpx")
    from seq2seq.serve.served_model import ServedModel
    from tests.test_serve_deepl import serving

    sentences = [
        "My teacher will buy apples today.",
        "The teacher is kind.",
        "Tom will buy rice.",
        "Where is your <b>teacher</b>?",
    ]
    glossary, terms = Glossary.parse("teacher\t导师\n"), {"teacher": "导师"}
    options = TranslateOptions(beam_size=2, glossary=glossary)
    served = ServedModel("terms", translator=term_model)
    try:
        for only in (True, False):
            term_model.constrain_terms = not only
            expected = term_model.translate(sentences, options)
            html = term_model.translate(sentences, replace(options, format="html"))
            term_model.constrain_terms = only  # the server must not read it
            with serving(served, beam_size=2, glossary_annotation_only=only) as url:
                with httpx.Client(base_url=url, timeout=60) as http:
                    libre = http.post(
                        "/translate",
                        json={"q": sentences, "source": "en", "target": "zh", "glossary": terms},
                    ).json()
                    native = http.post("/v1/translate", json={"text": sentences, "glossary": terms})
                    stored = http.post(
                        "/v2/glossaries",
                        json={
                            "name": "g",
                            "source_lang": "en",
                            "target_lang": "zh",
                            "entries": "teacher\t导师",
                            "entries_format": "tsv",
                        },
                    ).json()["glossary_id"]
                    deepl = http.post(
                        "/v2/translate",
                        json={
                            "text": sentences,
                            "source_lang": "EN",
                            "target_lang": "ZH",
                            "glossary_id": stored,
                            "tag_handling": "html",
                        },
                    )
            assert term_model.constrain_terms is only
            assert libre["translatedText"] == expected
            assert [item["text"] for item in native.json()["translations"]] == expected
            assert [item["text"] for item in deepl.json()["translations"]] == html
            # Unplaced terms are named, and why: the search's limit, or the model's copying.
            lacking = [w for w in libre.get("warnings", []) if "glossary term" in w]
            held = [o for text, o in zip(sentences, expected, strict=True) if "teacher" in text]
            assert bool(lacking) == any("导师" not in out for out in held)
            assert all(("annotation" in w) is only for w in lacking)
        # The annotation is what changes them: unannotated, the untrained model writes others.
        term_model.constrain_terms = False
        annotated = term_model.translate(sentences, options)
        assert annotated != term_model.translate(sentences, replace(options, glossary=None))
    finally:
        term_model.constrain_terms = True


def test_a_model_without_term_tags_reads_glossaries_as_before(plain_model):
    assert not plain_model.annotates_terms
    glossary = Glossary.parse("teacher\t导师\n")
    sentence = "My teacher will buy apples today."
    plans = plain_model.plan([sentence])
    assert term_tag_ids(plain_model.tokenizer) is None
    [out] = plain_model.translate([sentence], TranslateOptions(beam_size=2, glossary=glossary))
    assert "导师" in out and plans[0][0].ids == plain_model.encode_sentence(sentence)


def test_annotation_only_on_a_model_without_term_tags_says_it_keeps_the_search(tmp_path, capsys):
    from seq2seq.cli import main

    checkpoint = tiny_checkpoint(tmp_path / "p.ckpt", seed=2, source_ends_with_eos=True)
    (tmp_path / "g.tsv").write_text("teacher\t导师\n", encoding="utf-8")
    (tmp_path / "in.txt").write_text("My teacher will buy apples today.\n", encoding="utf-8")
    common = ["translate", "--checkpoint", str(checkpoint), "--glossary", str(tmp_path / "g.tsv")]
    common += ["--input", str(tmp_path / "in.txt"), "--beam-size", "2"]
    assert main([*common, "--output", str(tmp_path / "search.txt")]) == 0
    assert "annotation-only" not in capsys.readouterr().err
    assert main([*common, "--glossary-annotation-only", "--output", str(tmp_path / "o.txt")]) == 0
    assert "not trained with term annotation" in capsys.readouterr().err
    searched = (tmp_path / "search.txt").read_text(encoding="utf-8")
    assert "导师" in searched and (tmp_path / "o.txt").read_text(encoding="utf-8") == searched


@pytest.mark.slow
def test_a_term_model_takes_glossaries_through_the_cli_and_the_deepl_client(tmp_path_factory):
    deepl = pytest.importorskip("deepl")
    from seq2seq.cli import main
    from seq2seq.serve.served_model import ServedModel
    from tests.test_serve_deepl import serving

    def run(*argv: str) -> None:
        assert main(list(argv)) == 0

    root = tmp_path_factory.mktemp("term-cli")
    checkpoint = tiny_checkpoint(root / "t.ckpt", seed=2, terms=True, source_ends_with_eos=True)
    (root / "g.tsv").write_text("teacher\t导师\n", encoding="utf-8")
    (root / "in.txt").write_text("My teacher will buy apples today.\n", encoding="utf-8")
    common = ["translate", "--checkpoint", str(checkpoint), "--glossary", str(root / "g.tsv")]
    run(*common, "--input", str(root / "in.txt"), "--output", str(root / "out.txt"))
    assert "导师" in (root / "out.txt").read_text(encoding="utf-8")
    only = [*common, "--glossary-annotation-only", "--input", str(root / "in.txt")]
    run(*only, "--output", str(root / "only.txt"))
    assert len((root / "only.txt").read_text(encoding="utf-8").splitlines()) == 1

    with serving(ServedModel.load(checkpoint)) as url:
        client = deepl.Translator("any-key", server_url=url)
        glossary = client.create_glossary("terms", "EN", "ZH", {"teacher": "导师"})
        result = client.translate_text(
            "My teacher will buy apples today.",
            source_lang="EN",
            target_lang="ZH",
            glossary=glossary,
        )
        assert "导师" in result.text
