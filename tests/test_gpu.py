"""What only a GPU runs: the CUDA branch of the loss, attention through SDPA for a decoding
step (the CPU takes two matmuls there), and a bf16-mixed training run of ``seq2seq fit``.

Marked ``gpu`` and skipped without CUDA (CI and the 2-core machines have none); run them on a
GPU machine with ``pytest -m gpu``.
"""

import csv

import pytest
import torch
import torch.nn.functional as F

from seq2seq import Transformer
from seq2seq.attention import attend, step_attention
from seq2seq.decoding.decode import translate_ids
from seq2seq.decoding.search import SearchConfig
from seq2seq.loss import label_smoothed_cross_entropy
from tests.helpers import fit, random_ids, tiny_config

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.fixture(autouse=True)
def exact_float32_matmuls():
    """TF32 would round CUDA's products to 10 mantissa bits: compare in true float32."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def test_the_loss_on_cuda_is_cross_entropy_and_its_gradient():
    """On CUDA the loss takes all rows in one block; value and gradient stay autograd's."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(300, 1000, generator=generator).cuda().requires_grad_()
    targets = torch.randint(0, 1000, (300,), generator=generator).cuda()
    reference = logits.detach().clone().requires_grad_()
    ours = label_smoothed_cross_entropy(logits, targets, 0.1)
    theirs = F.cross_entropy(reference, targets, label_smoothing=0.1)
    ours.backward()
    theirs.backward()
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(logits.grad, reference.grad)


def test_a_decoding_step_through_sdpa_equals_the_cpu_matmul_path():
    """One query per row and head: CUDA's SDPA and the CPU's two matmuls agree, masks too."""
    generator = torch.Generator().manual_seed(1)
    q = torch.randn(3, 4, 1, 8, generator=generator)  # (B, H, 1 query, Dh)
    k, v = (torch.randn(3, 4, 6, 8, generator=generator) for _ in range(2))  # 6 source keys
    mask = torch.ones(3, 1, 1, 6, dtype=torch.bool)
    mask[0, ..., 4:] = False  # a padded source
    on_gpu = attend(q.cuda(), k.cuda(), v.cuda(), mask.cuda())
    torch.testing.assert_close(on_gpu.cpu(), step_attention(q, k, v, mask), atol=1e-5, rtol=1e-5)


def test_cached_beam_search_on_cuda_finds_what_the_cpu_finds():
    torch.manual_seed(2)
    model = Transformer(tiny_config()).eval()
    src = random_ids(4, 9, seed=3)
    search = SearchConfig(max_len_a=0.0, max_len_b=12)
    on_cpu = translate_ids(model, src, beam_size=3, config=search)
    on_gpu = translate_ids(model.cuda(), src.cuda(), beam_size=3, config=search)
    assert [h[0].tokens for h in on_gpu] == [h[0].tokens for h in on_cpu]


@pytest.mark.slow
def test_fit_trains_in_bf16_mixed_on_a_gpu(tmp_path, corpus):
    """``seq2seq fit`` on one GPU in bf16-mixed: the loss falls and the checkpoint is written
    with float32 weights (the precision plugin keeps master weights in float32)."""
    fit(tmp_path, corpus, 40, "--trainer.accelerator", "gpu", "--trainer.precision", "bf16-mixed")
    rows = list(csv.DictReader((tmp_path / "logs" / "version_0" / "metrics.csv").open()))
    losses = [float(row["train_loss"]) for row in rows if row.get("train_loss")]
    assert len(losses) >= 2 and losses[-1] < losses[0]
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=False)
    weights = [w for w in checkpoint["state_dict"].values() if w.is_floating_point()]
    assert weights and all(w.dtype == torch.float32 for w in weights)
