"""The training recipe (``training/module.py``): the paper's schedule, the label-smoothed loss
and its padding mask."""

import pytest
import torch

from seq2seq.data.batching import Batch
from seq2seq.training.module import TranslationModule
from seq2seq.training.schedule import cooldown_factor, inverse_sqrt_schedule
from tests.helpers import quiet_trainer, tiny_config


class FakeTimer:
    """Stands in for Lightning's Timer: ``elapsed`` seconds of a ``budget``."""

    def __init__(self, elapsed: float, budget: float) -> None:
        self.elapsed, self.budget = elapsed, budget

    def time_elapsed(self) -> float:
        return self.elapsed

    def time_remaining(self) -> float:
        return self.budget - self.elapsed


def test_progress_is_the_larger_of_steps_and_time_used(monkeypatch):
    module = TranslationModule(tiny_config())
    assert module.training_progress(100, 1000) == pytest.approx(0.1)  # no time budget
    timer = FakeTimer(elapsed=30.0, budget=60.0)
    monkeypatch.setattr(module, "_timer", lambda: timer)
    module._time_used = module._time_used_on_this_rank()
    assert module._time_used == pytest.approx(0.5)
    assert module.training_progress(100, 1000) == pytest.approx(0.5)  # time is ahead
    assert module.training_progress(700, 1000) == pytest.approx(0.7)  # steps are ahead
    timer.elapsed = 75.0  # past the budget
    module._time_used = module._time_used_on_this_rank()
    assert module.training_progress(100, 1000) == 1.0


def make_batch(src, tgt):
    """Right-pad lists of ids into a Batch (bos 2, eos 3, pad 0)."""
    width_s = max(map(len, src))
    width_t = max(map(len, tgt)) + 1
    pad = lambda rows, w: torch.tensor([r + [0] * (w - len(r)) for r in rows])  # noqa: E731
    tgt_in = pad([[2, *t] for t in tgt], width_t)
    tgt_out = pad([[*t, 3] for t in tgt], width_t)
    return Batch(pad(src, width_s), tgt_in, tgt_out, sum(map(len, src)), int((tgt_out != 0).sum()))


def test_loss_ignores_padding_and_counts_only_real_targets():
    torch.manual_seed(0)
    module = TranslationModule(tiny_config()).eval()
    src, tgt = [[5, 6, 7], [8, 9]], [[10, 11], [12, 13, 14, 15]]
    loss, _, n = module.loss(make_batch(src, tgt))
    # Same sentences with extra padding columns: identical loss and count.
    padded = make_batch([s + [0, 0] for s in src], tgt)
    padded.src = torch.nn.functional.pad(make_batch(src, tgt).src, (0, 3))
    loss_padded, _, n_padded = module.loss(padded)
    assert n == n_padded == 2 + 1 + 4 + 1
    torch.testing.assert_close(loss, loss_padded)
    # And the loss is the token-weighted mean of the two sentences' losses.
    one = [module.loss(make_batch([s], [t])) for s, t in zip(src, tgt, strict=True)]
    weighted = sum(item[0] * item[2] for item in one) / n
    torch.testing.assert_close(loss, weighted)


class LossIsNanOn(TranslationModule):
    """A module whose training loss is NaN on the chosen training batches (0-based calls)."""

    def __init__(self, bad_batches, **kwargs):
        super().__init__(tiny_config(), warmup_steps=2, **kwargs)
        self.bad_batches, self.calls = set(bad_batches), 0

    def loss(self, batch):
        loss, nll, n = super().loss(batch)
        if self.training:
            if self.calls in self.bad_batches:
                loss = loss * float("nan")
            self.calls += 1
        return loss, nll, n


def train_batches(count: int) -> list:
    generator = torch.Generator().manual_seed(0)
    rows = lambda n: torch.randint(4, 40, (3, n), generator=generator).tolist()  # noqa: E731
    return [make_batch(rows(5), rows(4)) for _ in range(count)]


def fit_on(module, batches, callbacks=()) -> None:
    trainer = quiet_trainer(max_epochs=1, callbacks=list(callbacks))
    loader = torch.utils.data.DataLoader(batches, batch_size=None, collate_fn=lambda b: b)
    trainer.fit(module, train_dataloaders=loader)
    return trainer


def test_nonfinite_loss_skips_the_update_and_training_goes_on():
    import lightning as L

    class Snapshots(L.Callback):
        def __init__(self):
            self.after = []  # parameters after each training batch

        def on_train_batch_end(self, trainer, module, *args):
            self.after.append(torch.cat([p.detach().flatten() for p in module.parameters()]))

    torch.manual_seed(0)
    module, snapshots = LossIsNanOn({2, 3}), Snapshots()
    fit_on(module, train_batches(6), callbacks=[snapshots])
    assert module.skipped_steps == 2
    after = snapshots.after
    assert torch.equal(after[1], after[2]) and torch.equal(after[2], after[3])  # no update
    assert not torch.equal(after[3], after[4]) and not torch.equal(after[0], after[1])
    assert torch.isfinite(after[-1]).all()
    assert module.trainer.callback_metrics["skipped_steps"] == 2


def test_a_loss_that_stays_nonfinite_stops_training_with_a_message():
    from seq2seq.errors import TrainingStopped

    module = LossIsNanOn(set(range(100)), max_nonfinite_steps=3)
    with pytest.raises(TrainingStopped, match=r"not finite \(nan\) for 3 batches in a row"):
        fit_on(module, train_batches(6))
    assert module.skipped_steps == 3


def test_the_whole_schedule_follows_the_clock_when_it_is_ahead_of_the_steps(monkeypatch):
    """At half the time budget and a tenth of the steps (a slow machine), the rate is the
    schedule's at half of max_steps: warmup, decay and cooldown keep their shape."""
    from types import SimpleNamespace

    module = TranslationModule(tiny_config(), warmup_steps=200, lr_scale=0.5, cooldown_steps=400)
    module._trainer = SimpleNamespace(max_steps=1000, callbacks=[])
    rate = module.configure_optimizers()["lr_scheduler"]["scheduler"].lr_lambdas[0]
    d_model = tiny_config().d_model
    on_steps = rate(100)
    assert on_steps == pytest.approx(inverse_sqrt_schedule(101, d_model, 200, 0.5))
    timer = FakeTimer(elapsed=50.0, budget=100.0)
    monkeypatch.setattr(module, "_timer", lambda: timer)
    module._time_used = module._time_used_on_this_rank()
    by_clock = inverse_sqrt_schedule(501, d_model, 200, 0.5) * cooldown_factor(0.5, 0.4)
    assert rate(100) == pytest.approx(by_clock)
    assert rate(700) == pytest.approx(  # steps ahead of the clock: the steps count
        inverse_sqrt_schedule(701, d_model, 200, 0.5) * cooldown_factor(0.7, 0.4)
    )


def test_a_run_stopped_by_max_time_ends_annealed_and_says_so(caplog, monkeypatch):
    """A time budget far too short for max_steps: the cooldown follows the clock, so the rate
    ends near zero (not at the peak), and one line says where and why it stopped. The clock
    is Lightning's Timer's, faked so that every step takes exactly 0.1 s."""
    from types import SimpleNamespace

    import lightning as L
    import lightning.pytorch.callbacks.timer as timer_module

    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(timer_module, "time", SimpleNamespace(monotonic=lambda: clock.now))

    class Rates(L.Callback):
        def __init__(self):
            self.rates = []

        def on_train_batch_start(self, trainer, *args):
            self.rates.append(trainer.optimizers[0].param_groups[0]["lr"])

        def on_before_optimizer_step(self, *args):
            clock.now += 0.1  # the step's time, seen by the module's hook that follows

    caplog.set_level("INFO")
    torch.manual_seed(0)
    module, rates = TranslationModule(tiny_config(), warmup_steps=2, cooldown_steps=50), Rates()
    trainer = quiet_trainer(max_steps=100, max_time={"seconds": 3}, callbacks=[rates])
    batches = train_batches(200)
    loader = torch.utils.data.DataLoader(batches, batch_size=None, collate_fn=lambda b: b)
    trainer.fit(module, train_dataloaders=loader)
    assert trainer.global_step == 30  # 3 s of 0.1 s steps, long before max_steps
    # By steps alone the cooldown (the last 50 of 100) would not have begun at step 30; by
    # the clock it covers the run's second half and ends at zero.
    peak, last = max(rates.rates), trainer.optimizers[0].param_groups[0]["lr"]
    assert last == 0.0
    assert rates.rates[-1] < 0.1 * peak
    assert rates.rates[14] > 0.9 * rates.rates[13] > 0  # no cooldown in the first half
    (said,) = [r.getMessage() for r in caplog.records if "stopped by max_time" in r.getMessage()]
    assert (
        said == f"stopped by max_time (0:00:03) at step 30/100; learning rate of the last "
        f"update {rates.rates[-1]:.2g} (peak {module_peak(module):.2g}; the cooldown "
        f"reaches 0 at max_time)"
    )


def test_the_time_used_survives_a_resume(tmp_path, monkeypatch):
    """Stop a time-budgeted run after 10 steps of 0.1 s, resume from its checkpoint: the
    schedule goes on from 1 s of the 3 s budget, not from zero."""
    from types import SimpleNamespace

    import lightning as L
    import lightning.pytorch.callbacks.timer as timer_module

    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(timer_module, "time", SimpleNamespace(monotonic=lambda: clock.now))

    class Tick(L.Callback):
        def __init__(self):
            self.time_used = []

        def on_before_optimizer_step(self, trainer, module, *args):
            clock.now += 0.1

        def on_train_batch_end(self, trainer, module, *args):
            self.time_used.append(module._time_used)

    def trainer(max_steps, tick):
        return quiet_trainer(max_steps=max_steps, max_time={"seconds": 3}, callbacks=[tick])

    loader = torch.utils.data.DataLoader(train_batches(40), batch_size=None, collate_fn=lambda b: b)
    first = trainer(10, Tick())
    first.fit(TranslationModule(tiny_config(), warmup_steps=2, cooldown_steps=5), loader)
    first.save_checkpoint(tmp_path / "last.ckpt")
    clock.now += 500.0  # the pause between the runs counts for nothing
    tick = Tick()
    second = trainer(15, tick)
    second.fit(
        TranslationModule(tiny_config(), warmup_steps=2, cooldown_steps=5),
        loader,
        ckpt_path=tmp_path / "last.ckpt",
        weights_only=False,
    )
    assert second.global_step == 15
    # Step 11's share of the budget: 1 s before the stop + 0.1 s now, of 3 s.
    assert tick.time_used[0] == pytest.approx(1.1 / 3)
    assert tick.time_used[-1] == pytest.approx(1.5 / 3)


def module_peak(module) -> float:
    hp = module.hparams
    return inverse_sqrt_schedule(
        hp.warmup_steps, module.config.d_model, hp.warmup_steps, hp.lr_scale
    )


def test_gradient_is_the_token_mean_over_accumulated_micro_batches():
    """accumulate_grad_batches=2 over two micro-batches of very different token counts gives
    the gradient of ONE batch holding both: each token weighs the same."""
    import lightning as L

    class Grads(L.Callback):
        def __init__(self):
            self.grads = None

        def on_train_batch_end(self, trainer, module, *args):
            if self.grads is None and trainer.global_step == 1:  # after the first update
                self.grads = {n: p.grad.clone() for n, p in module.named_parameters()}

    small = make_batch([[5, 6]], [[7]])  # 2 target tokens
    big = make_batch([[5, 6, 7, 8]] * 4, [[9, 10, 11, 12, 13]] * 4)  # 24 target tokens
    torch.manual_seed(0)
    module = TranslationModule(tiny_config(), warmup_steps=2)
    initial = {k: v.clone() for k, v in module.state_dict().items()}
    grads = Grads()
    trainer = quiet_trainer(
        max_steps=1,
        accumulate_grad_batches=2,
        callbacks=[grads],
    )
    loader = torch.utils.data.DataLoader([small, big], batch_size=None, collate_fn=lambda b: b)
    trainer.fit(module, train_dataloaders=loader)

    reference = TranslationModule(tiny_config(), warmup_steps=2)
    reference.load_state_dict(initial)
    reference.train()
    sums = [reference.loss(b)[0] * reference.loss(b)[2] for b in (small, big)]
    (sum(sums) / (2 + 24)).backward()
    for name, parameter in reference.named_parameters():
        torch.testing.assert_close(grads.grads[name], parameter.grad, rtol=1e-5, atol=1e-7)
