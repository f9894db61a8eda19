"""Micro-batches by token budget: the plan (pure) and the update's invariance to how a batch is cut."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import Qwen2ForCausalLM

from services.common.algo.batching import Sample, micro_batches
from services.common.config import PPOConfig
from tests.support import tiny_causal_lm
from services.common.ppo_update import ppo_update


@given(st.lists(st.integers(1, 300), max_size=40), st.integers(0, 2000))
@settings(max_examples=300, deadline=None)
def test_every_row_once_and_each_micro_batch_under_the_budget(lengths: list[int], budget: int) -> None:
    parts = micro_batches(lengths, budget)
    assert sorted(i for part in parts for i in part) == list(range(len(lengths)))
    assert all(part for part in parts)
    for part in parts:
        padded = len(part) * max(lengths[i] for i in part)
        assert budget == 0 or padded <= budget or len(part) == 1  # a row over the budget goes alone


def test_budget_zero_is_one_pass_and_rows_of_similar_length_share() -> None:
    assert micro_batches([5, 9, 3], 0) == [[0, 1, 2]]
    assert micro_batches([10, 2, 9, 3, 10], 20) == [[0, 4], [2, 3], [1]]
    assert micro_batches([50], 20) == [[0]]
    with pytest.raises(ValueError, match="token_budget"):
        micro_batches([3], -1)
    with pytest.raises(ValueError, match="length"):
        micro_batches([3, 0], 8)


def _model() -> Qwen2ForCausalLM:
    return tiny_causal_lm()


def _samples() -> list[Sample]:
    """Prompts and responses of different lengths, some with weights (merged duplicates)."""
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(24):
        p, r = 2 + i % 7, 1 + (i * 5) % 9
        ids = torch.randint(1, 40, (p + r,), generator=g).tolist()
        out.append(Sample(f"s{i}", tuple(ids[:p]), tuple(ids[p:]), float((i % 5) - 2) or 0.5,
                          weight=1.0 + (i % 3)))
    return out


@pytest.mark.parametrize("budget", [12, 40, 100])
def test_the_update_does_not_depend_on_how_the_batch_is_cut(budget: int) -> None:
    cfg = PPOConfig(optimizer_steps=2, epochs=2, lr=1e-3, ref_beta=0.1, max_kl=10.0, merge_duplicates=False)
    reference = _model()
    whole, cut = _model(), _model()
    m_whole = ppo_update(whole, torch.optim.AdamW(whole.parameters(), lr=1e-3), _samples(), cfg, 0,
                         reference=reference, seed=3)
    m_cut = ppo_update(cut, torch.optim.AdamW(cut.parameters(), lr=1e-3), _samples(),
                       cfg.model_copy(update={"micro_batch_tokens": budget}), 0, reference=reference, seed=3)
    assert m_whole["ppo/optimizer_steps"] == m_cut["ppo/optimizer_steps"] == 4.0
    moved = max(float((a.detach() - b.detach()).abs().max()) for a, b in zip(whole.parameters(), _model().parameters()))
    assert moved > 1e-4  # the update did train
    for a, b in zip(whole.parameters(), cut.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    for key in ("ppo/loss", "ppo/kl", "ppo/clip_fraction", "ppo/ref_kl", "ppo/kl_max"):
        assert m_cut[key] == pytest.approx(m_whole[key], rel=1e-4, abs=1e-7), key


def test_one_micro_batch_gradient_equals_the_whole_minibatch_gradient() -> None:
    """The accumulated gradient itself (before clipping and AdamW): one pass vs rows one at a time."""
    from services.common.algo.batching import make_batch
    from services.common.ppo_update import _accumulate, _logprobs

    model = _model()
    batch = make_batch(_samples(), 64, 0)
    rows = torch.arange(len(batch.sample_ids))
    old = _logprobs(model, batch, rows, PPOConfig()) + 0.05  # π_old a little off, so the ratios are not all 1
    grads = []
    for budget in (0, 1):  # budget 1: every row alone
        m = copy.deepcopy(model).train()
        cfg = PPOConfig(micro_batch_tokens=budget)
        _accumulate(m, batch, rows, old, old, None, cfg)
        grads.append([p.grad.clone() for p in m.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    assert max(float(g.abs().max()) for g in grads[0]) > 1e-5


def test_a_reloaded_reference_trains_like_a_resident_one_and_is_loaded_once_per_update() -> None:
    cfg = PPOConfig(optimizer_steps=2, lr=1e-3, ref_beta=0.5, merge_duplicates=False, micro_batch_tokens=40)
    reference = _model()
    with torch.no_grad():  # the reference differs from the policy, so the anchor pulls
        for p in reference.parameters():
            p.add_(0.05)
    loads = []

    @contextmanager
    def load() -> Iterator[torch.nn.Module]:
        loads.append(1)
        yield copy.deepcopy(reference)

    resident, reloaded = _model(), _model()
    m_res = ppo_update(resident, torch.optim.AdamW(resident.parameters(), lr=1e-3), _samples(), cfg, 0,
                       reference=reference, seed=1)
    m_rel = ppo_update(reloaded, torch.optim.AdamW(reloaded.parameters(), lr=1e-3), _samples(), cfg, 0,
                       reference=load, seed=1)
    assert len(loads) == 1 and m_rel["ppo/ref_kl"] == pytest.approx(m_res["ppo/ref_kl"]) and m_res["ppo/ref_kl"] > 0
    for a, b in zip(resident.parameters(), reloaded.parameters()):
        torch.testing.assert_close(a, b)


def test_logits_for_the_last_positions_only_give_the_same_log_probs_there() -> None:
    from services.common.models.logprobs import token_logprobs

    model = _model()
    ids = torch.randint(1, 40, (3, 12), generator=torch.Generator().manual_seed(2))
    attn = torch.ones_like(ids)
    full = token_logprobs(model, ids, attn)
    last5 = token_logprobs(model, ids, attn, keep_last=5)
    torch.testing.assert_close(last5[:, -4:], full[:, -4:])
    assert float(last5[:, :-4].detach().abs().max()) == 0.0 and float(full[:, 1:-4].detach().abs().min()) > 0.0


def test_bf16_autocast_trains_close_to_fp32_and_keeps_fp32_weights() -> None:
    """ppo.autocast=bf16: forward passes in bfloat16 (log-probs off by bf16 rounding, not more), the
    weights and AdamW state stay fp32, and the update moves the weights like the fp32 one."""
    from services.common.algo.batching import make_batch
    from services.common.ppo_update import _logprobs

    model = _model()
    batch = make_batch(_samples(), 64, 0)
    rows = torch.arange(len(batch.sample_ids))
    fp32 = _logprobs(model, batch, rows, PPOConfig())
    bf16 = _logprobs(model, batch, rows, PPOConfig(autocast="bf16"))
    gap = float((fp32 - bf16).abs().max())
    assert 0.0 < gap < 0.1  # bf16 did run (a gap), and only rounds (a small one)
    cfg = PPOConfig(optimizer_steps=2, lr=1e-3, merge_duplicates=False)
    a, b = _model(), _model()
    ppo_update(a, torch.optim.AdamW(a.parameters(), lr=1e-3), _samples(), cfg, 0, seed=3)
    opt = torch.optim.AdamW(b.parameters(), lr=1e-3)
    ppo_update(b, opt, _samples(), cfg.model_copy(update={"autocast": "bf16"}), 0, seed=3)
    assert all(p.dtype == torch.float32 for p in b.parameters())
    assert all(s["exp_avg"].dtype == torch.float32 for s in opt.state.values())
    start = list(_model().parameters())
    moves = [torch.cat([(p - p0).detach().flatten() for p, p0 in zip(m.parameters(), start)]) for m in (a, b)]
    # Adam's steps are sign-like, so entries with tiny gradients may flip; the update as a whole agrees
    assert float(torch.nn.functional.cosine_similarity(*moves, dim=0)) > 0.8
    assert float(moves[1].norm()) == pytest.approx(float(moves[0].norm()), rel=0.2)


def test_a_batch_moves_every_tensor_to_the_trained_models_device() -> None:
    """A GPU trainer builds its batches on the CPU; `ppo_update` moves them to the model's device."""
    from services.common.algo.batching import make_batch

    batch = make_batch(_samples(), 64, 0)
    moved = batch.to("meta")
    tensors = [f for f in vars(batch) if isinstance(getattr(batch, f), torch.Tensor)]
    assert len(tensors) == 6 and all(getattr(moved, f).device.type == "meta" for f in tensors)
    assert all(getattr(batch, f).device.type == "cpu" for f in tensors)  # the original is left as it was
    assert moved.sample_ids == batch.sample_ids and moved.dropped_ids == batch.dropped_ids
