"""The text-level Generator (generation.py); the id-level ``generate_ids`` is in test_decode.py."""

from seq2seq.decoding.sampling import SamplingConfig
from seq2seq.decoding.search import SearchConfig
from seq2seq.inference.generation import Generator
from tests.helpers import LLAMA, tiny_model

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


def test_streamed_text_waits_for_whole_characters(tmp_path):
    """A rare character spelled in byte pieces decodes as U+FFFD until its last byte: the
    stream shows it only once whole, and shows exactly the final text."""
    import torch

    from seq2seq.inference.checkpoint import load_model
    from seq2seq.inference.generation import _TextStream
    from tests.helpers import tiny_checkpoint

    tokenizer = load_model(tiny_checkpoint(tmp_path / "lm.ckpt", lm=True)).tokenizer
    prompt, text = tokenizer.encode("我"), "龘你好"
    new = tokenizer.encode(text)
    assert len(new) > len(text)  # 龘 is spelled in bytes
    shown: list[str] = []
    stream = _TextStream(tokenizer, prompt, eos=-1, on_text=shown.append)
    for token in new:
        stream.push(torch.tensor([token]))
    assert "\ufffd" not in "".join(shown)
    assert tokenizer.decode(prompt) + "".join(shown) == tokenizer.decode(prompt + new)
