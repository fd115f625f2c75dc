"""Learning a lexical shortlist (``data/shortlist.py``) and ``seq2seq shortlist`` end to end:
IBM Model 1 finds a toy dictionary, every sentence keeps the end of sentence, the byte pieces,
the frequent pieces and its own source pieces, and ``translate --shortlist`` reads the file the
command wrote (a whole-vocabulary one decodes exactly as none)."""

from __future__ import annotations

import random

import pytest

from seq2seq.cli import main
from seq2seq.data.shortlist import ShortlistSettings, Vocabulary, learn_shortlist
from seq2seq.data.tokenizer import checkpoint_tokenizer
from seq2seq.decoding.shortlist import Shortlist, vocabulary_of
from tests.helpers import checkpoint_command, synthetic_pairs, tiny_checkpoint

PAD, UNK, BOS, EOS = 0, 1, 2, 3
# Toy pieces: 4..9 English words, 10..15 their Chinese in the same order, 16 a function piece
# of every Chinese sentence, 17..18 byte pieces, 19 "▁9" and 20 "9" (a number copied bare).
PIECES = ["<pad>", "<unk>", "<s>", "</s>"] + [f"▁w{i}" for i in range(6)]
PIECES += [f"z{i}" for i in range(6)] + ["的", "<0x41>", "<0x42>", "▁9", "9"]
TOY = Vocabulary(len(PIECES), PIECES.__getitem__, frozenset({PAD, UNK, BOS, EOS}), EOS, (17, 18))


def toy_pairs(count: int = 400, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Sentences of 2 to 4 distinct words, each translated word for word, shuffled, with 的."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        words = rng.sample(range(6), rng.randint(2, 4))
        target = [10 + w for w in words] + [16]
        rng.shuffle(target)
        pairs.append(([4 + w for w in words] + [EOS], target + [EOS]))
    return pairs


def test_model_1_finds_each_words_translation_first():
    """的 is in every Chinese sentence, as often beside a word as its translation; EM gives
    it to NULL and each word its own translation."""
    settings = ShortlistSettings(per_source=1, frequent=0)
    shortlist = learn_shortlist(toy_pairs(), TOY, settings)
    for word in range(6):
        # Its translation, and itself: a copied word is still a candidate.
        assert shortlist.candidates_of(4 + word) == [4 + word, 10 + word]


def test_every_sentence_keeps_eos_bytes_frequent_pieces_and_its_own_spellings():
    shortlist = learn_shortlist(toy_pairs(), TOY, ShortlistSettings(per_source=2, frequent=1))
    assert shortlist.always.tolist() == [EOS, 16, 17, 18]  # 的 is the most frequent
    assert set(shortlist.candidates_of(19)) >= {19, 20}  # ▁9 may be written as 9
    assert set(shortlist.candidates_of(20)) >= {19, 20}


def test_no_pairs_and_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="no sentence pairs"):
        learn_shortlist([], TOY)
    with pytest.raises(ValueError, match="per_source must be an integer >= 0"):
        ShortlistSettings(per_source=-1)


# -- seq2seq shortlist, then translate --shortlist ------------------------------------------


@pytest.fixture(scope="module")
def learnt(tmp_path_factory):
    """A tiny checkpoint, its synthetic pairs as files, and the shortlist the command learnt."""
    root = tmp_path_factory.mktemp("shortlist")
    checkpoint = tiny_checkpoint(root / "tiny.ckpt")
    pairs = synthetic_pairs()
    (root / "train.en").write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    (root / "train.zh").write_text("".join(zh + "\n" for _, zh in pairs), encoding="utf-8")
    files = ("--src", root / "train.en", "--tgt", root / "train.zh")
    output = root / "vmap.txt"
    options = (*files, "--output", output, "--per-source", 5, "--frequent", 10)
    assert main(checkpoint_command("shortlist", checkpoint, *options)) == 0
    return checkpoint, output, root


def test_the_command_writes_a_file_the_checkpoints_vocabulary_reads(learnt):
    checkpoint, output, _ = learnt
    tokenizer = checkpoint_tokenizer(checkpoint)
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("\t</s> ")  # CTranslate2's always line first
    assert all(line.count("\t") == 1 for line in lines)
    pieces = vocabulary_of(tokenizer.id_to_piece, tokenizer.vocab_size)
    shortlist = Shortlist.read(output, pieces, tokenizer.vocab_size, tokenizer.eos_id)
    for piece in tokenizer.encode_source("Tom will buy apples")[:-1]:  # not its eos
        assert piece in shortlist.candidates_of(piece)  # copying stays possible
    assert len(shortlist.always) >= 10 + 1  # the frequent pieces and eos (and the bytes)


def translate(checkpoint, root, name, *options) -> list[str]:
    source = root / "in.en"
    source.write_text("Tom will buy apples today.\nWe can see the dog tomorrow.\n", "utf-8")
    output = root / name
    files = ("--input", source, "--output", output, "--beam-size", 3)
    assert main(checkpoint_command("translate", checkpoint, *files, *options)) == 0
    return output.read_text(encoding="utf-8").splitlines()


def test_translate_with_a_whole_vocabulary_shortlist_writes_what_it_writes_without(learnt):
    checkpoint, _, root = learnt
    tokenizer = checkpoint_tokenizer(checkpoint)
    whole = root / "whole.txt"
    Shortlist.full(tokenizer.vocab_size, tokenizer.eos_id).write(whole, tokenizer.id_to_piece)
    without = translate(checkpoint, root, "without.zh")
    assert translate(checkpoint, root, "whole.zh", "--shortlist", whole) == without
    learnt_lines = translate(checkpoint, root, "learnt.zh", "--shortlist", learnt[1])
    assert len(learnt_lines) == 2


def test_a_bad_shortlist_file_is_one_line_before_any_translating(learnt, tmp_path, capsys):
    checkpoint = learnt[0]
    bad = tmp_path / "bad.txt"
    bad.write_text("▁Tom\tnot-a-piece-here\n", encoding="utf-8")
    source = tmp_path / "in.en"
    source.write_text("Tom will buy apples.\n", encoding="utf-8")
    command = ("--input", source, "--shortlist", bad)
    assert main(checkpoint_command("translate", checkpoint, *command)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{bad}:1:" in err and "no piece" in err


def test_source_without_target_is_refused(learnt, capsys):
    checkpoint, output, root = learnt
    options = ("--src", root / "train.en", "--output", output)
    assert main(checkpoint_command("shortlist", checkpoint, *options)) == 2
    assert "--src and --tgt go together" in capsys.readouterr().err


def test_a_served_model_with_a_shortlist_decodes_with_it_in_whole_batches(learnt):
    from seq2seq.serve.served_model import ServedModel

    checkpoint, output, _ = learnt
    served = ServedModel.load(checkpoint, shortlist=output)
    assert served.translator.engine.shortlist is not None
    assert served.continuous(4000, 4) is None  # continuous batching takes no shortlist
    assert ServedModel.load(checkpoint).continuous(4000, 4) is not None
