"""Training-time modifiers (seq2seq.data.modifiers) and the dictionary's short segments:
deterministic for a seed, shares respected, dev/test and the tokenizer untouched, and the
cache of a run without modifiers unchanged."""

import numpy as np
import pytest

from seq2seq.data.dictionary import dictionary_pairs, plain_gloss
from seq2seq.data.modifiers import Modifiers, remove_end_punctuation, title_case
from seq2seq.data.permutation import uniforms
from seq2seq.data.sources import _load_hsk
from seq2seq.data.split import SPLITS
from seq2seq.errors import ConfigError
from tests.helpers import prepared_pairs, write_hsk_tsv

ON = {"uppercase": 0.1, "titlecase": 0.1, "no_end_punctuation": 0.2, "dictionary": 300}


@pytest.fixture(scope="module")
def tsv(tmp_path_factory):
    return write_hsk_tsv(tmp_path_factory.mktemp("corpus") / "pairs.tsv")


prepare = prepared_pairs


@pytest.fixture(scope="module")
def plain(tsv, tmp_path_factory):
    return prepare(tsv, tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def modified(tsv, tmp_path_factory):
    return prepare(tsv, tmp_path_factory.mktemp("modified"), ON)


def texts(dm, split):
    data, tokenizer = dm.dataset(split), dm.tokenizer
    return [(tokenizer.decode(src), tokenizer.decode(tgt)) for src, tgt in data]


def test_each_row_draws_the_same_whatever_else_is_drawn():
    rows = np.arange(10_000)
    draws = uniforms(7, rows, salt=1)
    assert np.array_equal(draws[5000:], uniforms(7, rows[5000:], salt=1))  # any shard
    assert not np.array_equal(draws, uniforms(8, rows, salt=1))  # another seed
    assert not np.array_equal(draws, uniforms(7, rows, salt=2))  # another modifier
    assert 0 <= draws.min() and draws.max() < 1 and abs(draws.mean() - 0.5) < 0.01


def test_the_modifiers_rewrite_their_shares_of_pairs():
    n = 20_000
    en = ["Where is the train station?"] * n
    zh = ["火车站在哪里？"] * n
    modifiers = Modifiers(uppercase=0.1, titlecase=0.15, no_end_punctuation=0.3)
    src, tgt, spans = modifiers.apply(en, zh, np.arange(n), seed=1)
    assert spans == [[]] * n  # no terms asked for
    upper = sum(s.startswith("WHERE IS THE TRAIN STATION") for s in src) / n
    title = sum(s.startswith("Where Is The Train Station") for s in src) / n
    no_stop = sum(not s.endswith("?") for s in src) / n
    assert abs(upper - 0.1) < 0.01 and abs(title - 0.15) < 0.01 and abs(no_stop - 0.3) < 0.015
    assert all(s.endswith("?") == t.endswith("？") for s, t in zip(src, tgt, strict=True))
    assert (src, tgt, spans) == modifiers.apply(en, zh, np.arange(n), seed=1)  # deterministic


def test_one_term_per_pair_draws_what_it_drew_before_the_later_settings():
    """The cache's key holds the modifiers, not how they draw: what a setting at its defaults
    writes must stay what caches already hold (a change needs a new terms.TERM_FORMAT).
    Recorded at TERM_FORMAT 3 (synonyms of one sense, terms as words, no function words)."""
    import hashlib
    import json

    pairs = _load_hsk()[:1500]
    en, zh = [a for a, _ in pairs], [b for _, b in pairs]
    src, tgt, spans = Modifiers(terms=0.8, no_end_punctuation=0.1).apply(
        en, zh, np.arange(1500), seed=1
    )
    rows = [
        [a, b, [[t.start, t.end, t.target] for t in s]]
        for a, b, s in zip(src, tgt, spans, strict=True)
    ]
    digest = hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()
    assert digest[:16] == "07b37bb04ddd145b"


def test_terms_per_pair_annotates_more_terms_and_keeps_one_per_pair_as_it_was():
    pairs = _load_hsk()[:1500]
    en, zh, rows = [a for a, _ in pairs], [b for _, b in pairs], np.arange(len(pairs))
    one = Modifiers(terms=0.8)
    three = Modifiers(terms=0.8, terms_per_pair=3)
    _, tgt1, spans1 = one.apply(en, zh, rows, seed=1)
    src3, tgt3, spans3 = three.apply(en, zh, rows, seed=1)
    assert max(map(len, spans1)) == 1 and max(map(len, spans3)) == 3
    assert sum(map(len, spans3)) > 1.2 * sum(map(len, spans1))
    # The first term of each pair is drawn as with one term per pair.
    assert all(a[0] in b for a, b in zip(spans1, spans3, strict=True) if a)
    for source, target, spans in zip(src3, tgt3, spans3, strict=True):
        assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))
        assert all(s.target in target and s.end <= len(source) for s in spans)
    # The default stays out of the cache's key: caches prepared before it was added hold.
    assert "terms_per_pair" not in one.cache_key()["modifiers"]
    assert three.cache_key() != one.cache_key()
    with pytest.raises(ConfigError, match="terms_per_pair"):
        Modifiers.from_dict({"terms": 0.5, "terms_per_pair": 0})


def test_unrelated_terms_take_their_share_of_the_swapped_terms():
    from seq2seq.data.terms import SWAP_SHARE, term_table, word_spans

    pairs = _load_hsk()[:1500]
    en, zh, rows = [a for a, _ in pairs], [b for _, b in pairs], np.arange(len(pairs))
    table = term_table(None)
    kinds = {"kept": 0, "synonym": 0, "unrelated": 0}
    modifiers = Modifiers(terms=1.0, unrelated_terms=0.5)
    for source, reference, target, spans in zip(
        en, zh, *modifiers.apply(en, zh, rows, seed=3)[1:], strict=True
    ):
        for span in spans:
            senses = table[tuple(w for w, _, _ in word_spans(source[span.start : span.end]))]
            kind = "kept" if span.target in reference else "synonym"
            kinds[kind if span.target in senses else "unrelated"] += 1
            assert span.target in target
    # Every dictionary term below SWAP_SHARE * 0.5 of its draws takes an unrelated word.
    assert abs(kinds["unrelated"] / sum(kinds.values()) - SWAP_SHARE * 0.5) < 0.05, kinds
    # Fewer than before TERM_FORMAT 3 (28% of the terms): a synonym must share the sense.
    assert kinds["synonym"] > 0.04 * sum(kinds.values()), kinds
    assert Modifiers(terms=0.8).cache_key() != Modifiers(terms=0.8, unrelated_terms=0.5).cache_key()
    assert "unrelated_terms" not in Modifiers(terms=0.8).cache_key()["modifiers"]
    with pytest.raises(ConfigError, match="unrelated_terms"):
        Modifiers.from_dict({"terms": 0.5, "unrelated_terms": 1.5})
    for setting in ({"unrelated_terms": 0.5}, {"terms_per_pair": 2}):  # nothing to draw for
        with pytest.raises(ConfigError, match="needs a share of pairs in terms"):
            Modifiers.from_dict(setting)


TERMS = Modifiers(terms=0.5)


def test_the_seed_names_a_modified_cache_with_a_given_tokenizer_too():
    """The modifiers draw from the seed: fine-tuning (a checkpoint's tokenizer, whose key has
    no seed) with another seed must not reuse the first seed's modified cache."""
    from seq2seq.data.layouts import PairLayout
    from seq2seq.data.prepare import PrepareSettings, cache_name
    from seq2seq.data.sources import CorpusSpec

    def name(seed, tokenizer=None, modifiers=TERMS):
        settings = PrepareSettings(
            CorpusSpec("bundled"),
            3000,
            "unigram",
            seed,
            400,
            9.0,
            64,
            "zh",
            None,
            128,
            tokenizer=tokenizer,
            modifiers=modifiers,
        )
        return cache_name(settings, PairLayout().cache_key(settings))

    assert name(1, b"spm") != name(2, b"spm")
    assert name(1) != name(2)  # the trained tokenizer's key holds the seed
    # Without modifiers a given tokenizer's cache does not depend on the seed, as before.
    assert name(1, b"spm", Modifiers()) == name(2, b"spm", Modifiers())


def test_title_case_and_end_punctuation_follow_their_rules():
    assert title_case("i don't know NASA's plan") == "I Don't Know NASA's Plan"
    assert remove_end_punctuation("Go now!", "现在走！") == ("Go now", "现在走")
    # Only where both sides end with a stop, and never down to nothing.
    assert remove_end_punctuation("Go now!", "现在走") == ("Go now!", "现在走")
    assert remove_end_punctuation("?", "？") == ("?", "？")


def test_settings_are_checked_with_one_line_errors():
    with pytest.raises(ConfigError, match="data.modifiers.uppercase"):
        Modifiers.from_dict({"uppercase": 1.5})
    with pytest.raises(ConfigError, match="unknown modifier 'lowercase'"):
        Modifiers.from_dict({"lowercase": 0.1})
    with pytest.raises(ConfigError, match="at most 1"):
        Modifiers.from_dict({"uppercase": 0.6, "titlecase": 0.6})
    assert not Modifiers.from_dict(None).active and Modifiers.from_dict({}).cache_key() == {}


def test_word_association_learns_the_corpus_words_translations():
    from seq2seq.data.alignment import aligned_term_pairs

    pairs = _load_hsk()
    learnt = aligned_term_pairs(pairs, 150)
    table = dict(learnt)
    assert len(table) == len(learnt) == 150  # one translation per word, the limit kept
    for en, zh in [("teacher", "老师"), ("doctor", "医生"), ("problem", "问题"), ("today", "今天")]:
        assert table[en] == zh
    assert not {"the", "and", "you"} & set(table)  # function words are no terms
    assert all(len(zh) >= 2 and zh in "".join(z for _, z in pairs) for zh in table.values())
    assert aligned_term_pairs(pairs, 150) == learnt  # no randomness: the same every time


def test_english_words_are_split_as_glossaries_split_them(tmp_path):
    from seq2seq.data.alignment import aligned_term_pairs, english_words
    from seq2seq.data.terms import read_termbase

    assert english_words("My father-in-law didn't see the café.") == {
        "father",
        "law",
        "see",
        "café",
    }
    pairs = [(f"My father-in-law is {age}.", f"我的岳父{age}岁。") for age in range(30, 40)]
    learnt = aligned_term_pairs(pairs, 10)
    path = tmp_path / "terms.tsv"
    path.write_text("".join(f"{en}\t{zh}\n" for en, zh in learnt), encoding="utf-8")
    assert read_termbase(str(path)) == learnt and learnt  # every learnt term is one word


def test_a_termbase_or_learnt_string_is_annotated_as_the_reference_has_it(tmp_path):
    """Only the dictionary's senses are swapped for a synonym: a learnt string holding a
    neighbour (的车) swapped for a sense of "car" would make the reference wrong (我汽车)."""
    from seq2seq.data.terms import find_term

    termbase = tmp_path / "learnt.tsv"
    termbase.write_text("car\t的车\n", encoding="utf-8")
    for swap in (0.0, 0.1, 0.5, 0.9):
        zh, span = find_term("This is my car.", "这是我的车。", 0.0, swap, str(termbase))
        assert (zh, span.target) == ("这是我的车。", "的车")
    # The dictionary's own senses still are: 老师 becomes another headword of "teacher".
    zh, span = find_term("My teacher is kind.", "我的老师很好。", 0.0, 0.1, str(termbase))
    assert span.target != "老师" and zh == f"我的{span.target}很好。"


def test_a_fragment_stands_for_the_longer_string_that_holds_it():
    from seq2seq.data.alignment import aligned_term_pairs

    # 器人 only ever occurs inside 机器人: the robot is 机器人, not its fragment; 机器 occurs
    # in 机器人 too, but as often apart: the machine is 机器.
    doing = [("walks", "走路"), ("talks", "说话"), ("sings", "唱歌"), ("works", "工作")]
    state = [("is old", "很旧"), ("broke", "坏了"), ("is loud", "在响"), ("stopped", "停了")]
    whose = [
        ("This", "这台"),
        ("That", "那台"),
        ("Every", "每个"),
        ("Tom's", "汤姆的"),
        ("Her", "她的"),
    ]
    pairs = [(f"{s} robot {en}.", f"{z}机器人{zh}。") for s, z in whose for en, zh in doing]
    pairs += [(f"{s} machine {en}.", f"{z}机器{zh}。") for s, z in whose for en, zh in state]
    table = dict(aligned_term_pairs(pairs, 10))
    assert table["robot"] == "机器人" and table["machine"] == "机器"


def test_dictionary_glosses_are_plain_senses():
    assert plain_gloss("to delete") == "delete"
    assert plain_gloss("variant of 刪|删[shan1]") is None
    assert plain_gloss("surname Li") is None
    assert plain_gloss("CL:個|个[ge4]") is None
    assert plain_gloss("teacher (old)") == "teacher"
    pairs = dictionary_pairs(2000)
    assert len(pairs) == 2000 and len(set(pairs)) == 2000
    assert ("teacher", "老师") in pairs or ("Teacher", "老师") in pairs
    assert all(en and zh and len(en.split()) <= 4 for en, zh in pairs)


def test_only_training_pairs_are_modified_and_dev_test_stay_as_written(plain, modified):
    for split in ("dev", "test"):
        assert texts(plain, split) == texts(modified, split)
        assert plain.split_texts(split) == modified.split_texts(split)
    # The tokenizer learns from the text before any modifier: the same vocabulary.
    assert plain.tokenizer.to_bytes() == modified.tokenizer.to_bytes()
    before, after = texts(plain, "train"), texts(modified, "train")
    dictionary = modified.report["dictionary_pairs"]
    assert 250 <= dictionary <= 300 and len(after) == len(before) + dictionary
    changed = [b != a for b, a in zip(before, after, strict=False)]
    assert 0.25 < np.mean(changed) < 0.5  # ~1 - 0.8 * 0.8 of pairs, less those with no stop
    assert any(en.isupper() and len(en) > 10 for en, _ in after)
    dictionary_english = {en for en, _ in after[len(before) :]}
    assert all(len(en.split()) <= 4 for en in dictionary_english)


def test_the_modified_cache_is_the_same_for_any_number_of_processes(tsv, modified, tmp_path):
    again = prepare(tsv, tmp_path, ON, num_proc=2)
    assert again.cache_path.name == modified.cache_path.name
    for split in SPLITS:
        assert texts(again, split) == texts(modified, split)


def test_without_modifiers_the_cache_is_named_as_before(plain, modified):
    # An inactive setting does not enter the hash: existing caches and checkpoints stay valid.
    assert "modifiers" not in plain.hparams or plain.hparams["modifiers"] is None
    assert plain.cache_path != modified.cache_path


def test_term_annotation_marks_a_term_the_reference_holds_with_tags_only_sources_get(
    tsv, plain, tmp_path
):
    from seq2seq.data.terms import TERM_TAGS, term_tag_ids

    dm = prepare(tsv, tmp_path, {"terms": 0.5})
    tags = term_tag_ids(dm.tokenizer)
    assert tags is not None and term_tag_ids(plain.tokenizer) is None
    annotated = 0
    for src, tgt in dm.dataset("train"):
        assert not set(tags) & set(tgt)  # targets never hold a tag
        if tags[0] in src:
            annotated += 1
            start, trans, end = (src.index(t) for t in tags)
            assert start < trans < end
            # The annotated translation is in the reference (the synonym replaced it there).
            term = dm.tokenizer.decode(src[trans + 1 : end])
            assert term and term in dm.tokenizer.decode(tgt)
    assert 0.1 * len(dm.dataset("train")) < annotated < 0.5 * len(dm.dataset("train"))
    for split in ("dev", "test"):
        assert not any(tags[0] in src for src, _ in dm.dataset(split))
    # A user's text holding a tag's spelling is ordinary text, never the tag.
    assert not set(tags) & set(dm.tokenizer.encode_source(f"my {TERM_TAGS[0]} teacher"))


def test_a_termbase_adds_its_terms_and_bad_lines_are_one_line_errors(tsv, tmp_path):
    from seq2seq.data.terms import term_tag_ids
    from seq2seq.errors import DataError

    termbase = tmp_path / "terms.tsv"
    # Beijing is no dictionary term (proper nouns are left out of it): only the termbase has it.
    termbase.write_text("# my terms\nBeijing\t北京\n\nteacher\t恩师\n", encoding="utf-8")
    dm = prepare(tsv, tmp_path / "cache", {"terms": 1.0, "termbase": str(termbase)})
    tags, tokenizer = term_tag_ids(dm.tokenizer), dm.tokenizer
    annotated = [
        tokenizer.decode(src[src.index(tags[1]) + 1 : src.index(tags[2])])
        for src, _ in dm.dataset("train")
        if tags[0] in src
    ]
    assert "北京" in annotated and set(annotated) - {"北京", "恩师"}  # and the dictionary's
    bad = tmp_path / "bad.tsv"
    bad.write_text("water\t水\nno tab here\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.tsv.*2.*english<TAB>chinese"):
        prepare(tsv, tmp_path / "cache2", {"terms": 0.5, "termbase": str(bad)})
    with pytest.raises(ConfigError, match="termbase needs"):
        Modifiers.from_dict({"termbase": str(termbase)})


def test_aligned_terms_are_learnt_written_to_the_cache_and_annotated(tsv, tmp_path):
    from seq2seq.data.terms import read_termbase, term_table, term_tag_ids

    termbase = tmp_path / "mine.tsv"
    termbase.write_text("Beijing\t北京\n", encoding="utf-8")
    modifiers = {"terms": 1.0, "termbase": str(termbase), "aligned_terms": 100}
    dm = prepare(tsv, tmp_path / "cache", modifiers)
    learnt = read_termbase(str(dm.cache_path / "terms.tsv"))
    assert learnt[0] == ("Beijing", "北京") and len(learnt) == 1 + 100  # the user's first
    assert dm.report["aligned_terms"] == 100
    dictionary = term_table()
    only_aligned = {(en, zh) for en, zh in learnt[1:] if zh not in dictionary.get((en,), ())}
    tags, tokenizer = term_tag_ids(dm.tokenizer), dm.tokenizer
    annotated = set()
    for src, tgt in dm.dataset("train"):
        if tags[0] in src:
            english = tokenizer.decode(src[src.index(tags[0]) + 1 : src.index(tags[1])])
            term = tokenizer.decode(src[src.index(tags[1]) + 1 : src.index(tags[2])])
            annotated.add((english.casefold(), term))
            assert term in tokenizer.decode(tgt)
    assert annotated & only_aligned  # terms only the corpus's own association gave
    with pytest.raises(ConfigError, match="aligned_terms needs"):
        Modifiers.from_dict({"aligned_terms": 10})
    with pytest.raises(ConfigError, match="aligned_terms must be a count"):
        Modifiers.from_dict({"terms": 0.5, "aligned_terms": -1})
