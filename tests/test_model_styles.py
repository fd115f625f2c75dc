"""The decoder style options of ModelConfig (RMSNorm, learned/rotary positions, GELU/SwiGLU, no
biases) build the named parts of the model (beside test_model.py)."""

from seq2seq.layers import RMSNorm
from tests.helpers import GPT, LLAMA, tiny_model


def test_style_options_build_the_named_parts():
    gpt, llama = tiny_model(**GPT), tiny_model(**LLAMA)
    assert [n for n, _ in gpt.named_parameters() if n.startswith("positions")] == [
        "positions.weight"
    ]
    llama_names = [n for n, _ in llama.named_parameters()]
    assert not any(n.endswith("bias") for n in llama_names)
    assert "decoder.layers.0.feed_forward.linear3.weight" in llama_names  # SwiGLU's W3
    assert isinstance(llama.decoder.layers[0].norm1, RMSNorm)
    assert llama.positions is None and llama.rotary is not None
    # Still one tied embedding for source, target and output.
    assert sum(p.shape[0] == 40 for p in llama.parameters()) == 1
