"""The text-level Generator (generation.py); the id-level ``generate_ids`` is in test_scoring.py."""

from helpers import LLAMA, tiny_model
from seq2seq.generation import Generator
from seq2seq.search import SamplingConfig, SearchConfig

EOS = 3


class CharTokenizer:
    """Letters a-z are ids 4-29; enough of a tokenizer for ``Generator``."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) - ord("a") + 4 for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i - 4 + ord("a")) if 4 <= i < 30 else "#" for i in ids if i > EOS)


def test_generator_seeds_each_prompt_by_its_index_in_the_input_not_in_its_batch():
    model = tiny_model(seed=4, decoder_only=True, **LLAMA)
    generator = Generator(model, CharTokenizer(), SearchConfig())
    sample = SamplingConfig(seed=3)
    alone = generator.generate(["ab"], 8, sample)[0]
    # Batches put the longest prompt first: "ab" is row 1 of its batch, or in a batch alone.
    assert generator.generate(["ab", "cdefg"], 8, sample)[0] == alone
    assert generator.generate(["ab", "cdefg"], 8, sample, max_tokens=20)[0] == alone
