import math

import torch

from seq2seq.embedding import SharedEmbedding, sinusoid_table


def test_sinusoids_follow_the_paper_formula():
    table = sinusoid_table(50, 16)
    for pos in (0, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert math.isclose(table[pos, 2 * i], math.sin(angle), abs_tol=1e-6)
            assert math.isclose(table[pos, 2 * i + 1], math.cos(angle), abs_tol=1e-6)


def test_embedding_is_scaled_by_sqrt_d_model_and_projects_with_the_same_weight():
    emb = SharedEmbedding(10, 16, pad_id=0)
    ids = torch.tensor([[1, 2, 0]])
    expected = emb.weight[ids] * 4.0  # sqrt(16)
    assert torch.allclose(emb(ids), expected)
    assert torch.all(emb(ids)[0, 2] == 0)  # the pad row starts at zero
    hidden = torch.randn(1, 3, 16)
    assert torch.allclose(emb.project(hidden), hidden @ emb.weight.T)
