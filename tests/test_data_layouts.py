"""Layouts: the length the sampler budgets is the width an example takes once collated."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from seq2seq.data.batching import collate as default_collate
from seq2seq.data.layouts import BlockLayout, JoinedPairLayout, PairLayout, choose_layout
from seq2seq.data.lm import TokenBlocks
from seq2seq.data.prepare import PrepareSettings
from seq2seq.data.sources import CorpusSpec
from seq2seq.data.tokenized_pairs import TokenizedPairs
from seq2seq.errors import ConfigError

TOKENIZER = SimpleNamespace(sep_id=4, pad_id=0, bos_id=2, eos_id=3)  # what collation reads
SETTINGS = PrepareSettings(
    spec=CorpusSpec(),
    vocab_size=100,
    spm_model_type="unigram",
    seed=1,
    max_len_chars=400,
    max_ratio=12.0,
    max_len=6,
    lm_side="zh",
    text_field=None,
    block_size=8,
)


def pairs():
    src = [[5], [6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16]]
    tgt = [[20, 21, 22, 23], [24], [25, 26], [27]]
    return TokenizedPairs.from_lists(src, tgt)


def blocks():
    rows = np.arange(3 * 9, dtype=np.int32).reshape(3, 9) + 5  # block_size 8
    rows[-1, 4:] = 0  # a padded tail
    return TokenBlocks(rows)


CASES = {
    # layout, its data, the positions one collated example takes in the token budget:
    # a pair's longer side plus its bos or eos (tgt_in is [bos] tgt), a joined sequence's
    # whole width, a block's block_size inputs plus the one extra token it holds.
    "pairs": (PairLayout(), pairs(), lambda b: max(b.src.size(1), b.tgt_in.size(1) - 1) + 1),
    "joined": (JoinedPairLayout(), pairs(), lambda b: b.tgt_in.size(1)),
    "blocks": (BlockLayout(), blocks(), lambda b: b.tgt_in.size(1) + 1),
}


@pytest.mark.parametrize("case", CASES)
def test_each_example_costs_its_length_when_collated_alone(case):
    layout, data, width = CASES[case]
    collate = layout.collate(TOKENIZER) or default_collate
    lengths = layout.lengths(data)
    assert len(lengths) == len(data)
    assert [width(collate([data[i]])) for i in range(len(data))] == list(lengths)


@pytest.mark.parametrize("layout", [PairLayout(), JoinedPairLayout()])
def test_the_budget_must_hold_the_longest_pair(layout):
    longest = layout.pair_length(SETTINGS.max_len, SETTINGS.max_len)
    layout.check_budget(longest, SETTINGS)
    with pytest.raises(ValueError, match="cannot hold one pair"):
        layout.check_budget(longest - 1, SETTINGS)


def test_the_budget_must_hold_one_block():
    BlockLayout().check_budget(SETTINGS.block_size + 1, SETTINGS)
    with pytest.raises(ConfigError, match="cannot hold one block"):
        BlockLayout().check_budget(SETTINGS.block_size, SETTINGS)


def test_each_layout_hashes_only_the_settings_it_reads():
    names = {layout.cache_name(SETTINGS) for layout in (PairLayout(), JoinedPairLayout())}
    assert len(names) == 2 and BlockLayout().cache_name(SETTINGS).startswith("lm-bundled-")
    bigger_blocks = dataclasses.replace(SETTINGS, block_size=99)
    assert PairLayout().cache_name(bigger_blocks) == PairLayout().cache_name(SETTINGS)
    assert BlockLayout().cache_name(bigger_blocks) != BlockLayout().cache_name(SETTINGS)
    longer_pairs = dataclasses.replace(SETTINGS, max_len=99)
    assert PairLayout().cache_name(longer_pairs) != PairLayout().cache_name(SETTINGS)
    assert BlockLayout().cache_name(longer_pairs) == BlockLayout().cache_name(SETTINGS)


def test_the_layout_is_chosen_by_task_and_decoder_only():
    assert type(choose_layout("translation", False)) is PairLayout
    assert type(choose_layout("translation", True)) is JoinedPairLayout
    assert type(choose_layout("lm", True)) is BlockLayout
    with pytest.raises(ConfigError, match="needs a decoder-only model"):
        choose_layout("lm", False)
    with pytest.raises(ConfigError, match="data.task must be one of"):
        choose_layout("summarise", False)
