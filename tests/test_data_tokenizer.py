"""The joint SentencePiece tokenizer: fixed specials, exact size, lossless round trips."""

import pytest

from seq2seq.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, clean_pairs
from seq2seq.data.tokenizer import SEP, load_tokenizer, tokenizer_from_bytes
from tests.helpers import synthetic_pairs

VOCAB = 3000  # HSK needs ~1.8k single characters at 0.9995 coverage, plus 256 byte pieces

# Characters HSK never uses: rare CJK, emoji (4 UTF-8 bytes), Cyrillic, a combining accent, a
# zero-width joiner sequence, a CJK extension B character.
RARE = [
    "蜻蜓点水。",
    "Он сказал «привет» 😀!",
    "Cafe\u0301 and naïve résumé",
    "👩\u200d💻 写代码",
    "𠀀字",
]


@pytest.fixture(scope="module")
def hsk_pairs():
    hsk = pytest.importorskip("hsk_sentences_audio")
    import json
    from pathlib import Path

    rows = json.loads((Path(hsk.__file__).parent / "data" / "sentences.json").read_text("utf-8"))
    pairs, _ = clean_pairs((row["translation"]["en"], row["chinese"]) for row in rows)
    return pairs


@pytest.fixture(scope="module")
def tokenizer(hsk_pairs):
    return Tokenizer.train([text for pair in hsk_pairs for text in pair], vocab_size=VOCAB)


def test_special_ids_and_exact_vocab_size(tokenizer):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert tokenizer.vocab_size == VOCAB
    assert [tokenizer.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]


def byte_piece_ids(tokenizer):
    return [i for i in range(tokenizer.vocab_size) if tokenizer.id_to_piece(i).startswith("<0x")]


def test_byte_pieces_follow_the_specials(tokenizer):
    assert byte_piece_ids(tokenizer) == list(range(4, 4 + 256))
    assert tokenizer.id_to_piece(4) == "<0x00>" and tokenizer.id_to_piece(259) == "<0xFF>"


def test_unseen_characters_round_trip_exactly_without_unk(tokenizer, hsk_pairs):
    seen = {char for pair in hsk_pairs for text in pair for char in text}
    for text in RARE:
        assert set(text) - seen, f"{text!r} should hold characters absent from training"
        ids = tokenizer.encode(text)
        assert UNK_ID not in ids
        assert set(ids) & set(byte_piece_ids(tokenizer)), "rare characters become byte pieces"
        assert tokenizer.decode(ids) == text


def test_incomplete_utf8_decodes_to_replacement_characters(tokenizer):
    prefix = tokenizer.encode("我看见")
    dragonfly = tokenizer.encode("蜻")  # three byte pieces, maybe after a "▁" piece
    byte_ids = [i for i in dragonfly if tokenizer.id_to_piece(i).startswith("<0x")]
    assert len(byte_ids) == 3
    # A model cut off (or going astray) after a character's first bytes: one U+FFFD per
    # stray byte (SentencePiece's rule), nothing raises, the text around it survives.
    for cut in (1, 2):
        text = tokenizer.decode([*prefix, *byte_ids[:cut], EOS_ID])
        assert text == "我看见" + "\ufffd" * cut
    assert tokenizer.decode([*prefix, *byte_ids, EOS_ID]) == "我看见蜻"
    stray = [tokenizer.piece_to_id("<0xFF>"), tokenizer.piece_to_id("<0x80>")]
    assert tokenizer.decode([*stray, *tokenizer.encode("好")]) == "\ufffd\ufffd 好"


def test_separator_stays_a_control_symbol_before_the_bytes(hsk_pairs):
    texts = [text for pair in hsk_pairs[:1500] for text in pair]
    tokenizer = Tokenizer.train(texts, vocab_size=1500, user_symbols=[SEP])
    assert tokenizer.vocab_size == 1500
    assert [tokenizer.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "<s>", "</s>", SEP]
    assert tokenizer.sep_id == 4 and byte_piece_ids(tokenizer) == list(range(5, 5 + 256))
    # Ordinary text never produces it (its characters are spelled out instead) ...
    assert tokenizer.sep_id not in tokenizer.encode(f"a {SEP} b")
    assert tokenizer.decode(tokenizer.encode(f"a {SEP} b")) == f"a {SEP} b"
    # ... and a decoder-only model's separator decodes to nothing.
    ids = [*tokenizer.encode("Hello"), tokenizer.sep_id, *tokenizer.encode("你好")]
    assert tokenizer.decode(ids) == "Hello 你好"  # the "▁" of the second encode, not <sep>


def test_round_trip_both_languages(tokenizer, hsk_pairs):
    for en, zh in hsk_pairs[::50]:
        for text in (en, zh):
            ids = tokenizer.encode(text)
            assert ids and not {PAD_ID, UNK_ID, BOS_ID, EOS_ID} & set(ids)
            assert tokenizer.decode(ids) == text


def test_chinese_decodes_without_spaces(tokenizer):
    text = "我们明天去北京，好吗？"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    # Only the sentence-initial piece carries the word-boundary mark "▁" (dropped on decode).
    pieces = [tokenizer.id_to_piece(i) for i in tokenizer.encode(text)]
    assert all("▁" not in piece for piece in pieces[1:])


def test_decode_strips_specials_and_stops_at_eos(tokenizer):
    ids = tokenizer.encode("Hello, teacher!")
    noisy = [BOS_ID, *ids, EOS_ID, *tokenizer.encode("junk"), PAD_ID, PAD_ID]
    assert tokenizer.decode(noisy) == "Hello, teacher!"
    assert tokenizer.encode_batch(["Hello, teacher!", "你好"]) == [ids, tokenizer.encode("你好")]


def test_serialization(tokenizer, tmp_path):
    again = Tokenizer.from_bytes(tokenizer.to_bytes())
    tokenizer.save(tmp_path / "spm.model")
    loaded = Tokenizer.load(tmp_path / "spm.model")
    for tok in (again, loaded):
        assert tok.encode("老师，您好！") == tokenizer.encode("老师，您好！")
        assert tok.vocab_size == VOCAB


@pytest.fixture(scope="module")
def small():
    """A tokenizer of the synthetic pairs (no extra package needed; a second)."""
    return Tokenizer.train([text for pair in synthetic_pairs() for text in pair], 406)


def test_new_tokenizers_end_sources_with_eos_and_nothing_else(small):
    texts = ["I will buy tea today.", "我今天会买茶。"]
    assert small.source_ends_with_eos
    assert small.encode_source(texts[0]) == [*small.encode(texts[0]), EOS_ID]
    assert small.encode_sources(texts) == [[*ids, EOS_ID] for ids in small.encode_batch(texts)]
    assert small.encode_target(texts[1]) == small.encode(texts[1])
    assert small.encode_targets(texts) == small.encode_batch(texts)
    assert all(EOS_ID not in ids for ids in [small.encode(texts[0]), *small.encode_batch(texts)])
    assert small.decode(small.encode_source(texts[0])) == texts[0]


def test_a_tokenizer_of_an_older_model_leaves_sources_without_eos(small, tmp_path):
    small.save(tmp_path / "spm.model")
    older = [
        Tokenizer.from_bytes(small.to_bytes(), source_ends_with_eos=False),
        Tokenizer(small.to_bytes(), False),
        Tokenizer.load(tmp_path / "spm.model", False),
        tokenizer_from_bytes(small.to_bytes(), source_ends_with_eos=False),
        load_tokenizer(tmp_path / "spm.model", source_ends_with_eos=False),
    ]
    text = "Tom can see the red bag."
    for tokenizer in older:
        assert not tokenizer.source_ends_with_eos
        assert tokenizer.encode_source(text) == small.encode(text)
        assert tokenizer.encode_sources([text]) == [small.encode(text)]
    # By default every way of loading one gives a new model's tokenizer.
    data = small.to_bytes()
    newer = [
        Tokenizer.from_bytes(data),
        tokenizer_from_bytes(data),
        load_tokenizer(tmp_path / "spm.model"),
    ]
    for tokenizer in newer:
        assert tokenizer.encode_source(text) == [*small.encode(text), EOS_ID]


def test_training_is_deterministic(hsk_pairs, tokenizer):
    texts = [text for pair in hsk_pairs for text in pair]
    assert Tokenizer.train(texts, vocab_size=VOCAB).to_bytes() == tokenizer.to_bytes()


def test_too_small_corpus_for_vocab_raises():
    with pytest.raises(RuntimeError):
        Tokenizer.train(["ab", "ba"], vocab_size=5000)


def test_hugging_face_export_reads_byte_pieces_alike(tokenizer, tmp_path):
    transformers = pytest.importorskip("transformers")
    from seq2seq.config import ModelConfig
    from seq2seq.tools.export import write_marian_tokenizer

    write_marian_tokenizer(tokenizer, ModelConfig(vocab_size=tokenizer.vocab_size), tmp_path)
    marian = transformers.MarianTokenizer.from_pretrained(tmp_path)
    # With sacremoses installed Marian first rewrites punctuation (« », Chinese full stops);
    # this test is about the vocabulary files, so leave the text as it is.
    marian.punc_normalizer = lambda text: text
    for text in [*RARE, "我们明天去北京，好吗？"]:
        ids = marian(text).input_ids  # Marian appends </s>, as our sources end
        assert ids == [*tokenizer.encode(text), EOS_ID] == tokenizer.encode_source(text)
        assert marian.decode(ids, skip_special_tokens=True) == text
