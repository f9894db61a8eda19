"""One PPO update (`services.common.training.ppo_update`) on a real tiny causal LM: epochs,
minibatches and the KL early stop."""

from __future__ import annotations

import math

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from services.common.algo.batching import Sample, make_batch
from services.common.config import PPOConfig
from services.common.models.logprobs import token_logprobs
from services.common.training import ppo_update


def _model() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return Qwen2ForCausalLM(config).eval()


def _samples(n: int = 16) -> list[Sample]:
    return [Sample(f"s{i}", (1, 2 + i % 5, 3), (4 + i % 3, 5), 1.0 if i % 2 else -1.0) for i in range(n)]


def test_steps_are_minibatches_times_epochs() -> None:
    model = _model()
    metrics = ppo_update(model, torch.optim.AdamW(model.parameters(), lr=1e-3), _samples(),
                         PPOConfig(optimizer_steps=4, epochs=3), pad_id=0)
    assert metrics["ppo/optimizer_steps"] == 12.0 and metrics["ppo/early_stopped"] == 0.0
    assert metrics["ppo/samples"] == 16.0 and metrics["ppo/kl_max"] > 0.0


def test_update_stops_before_the_minibatch_whose_kl_exceeds_max_kl() -> None:
    before = _model()
    after = _model()
    # the first step stays inside the trust region on the whole batch, but the next minibatch
    # already sees its tokens moved further than max_kl: the update stops there
    metrics = ppo_update(after, torch.optim.AdamW(after.parameters(), lr=0.03), _samples(),
                         PPOConfig(optimizer_steps=4, epochs=2, lr=0.03, max_kl=0.2), pad_id=0)
    assert metrics["ppo/early_stopped"] == 1.0 and metrics["ppo/reverted_steps"] == 0.0
    assert metrics["ppo/optimizer_steps"] == 1.0  # measured: one step inside, the second minibatch already outside
    assert metrics["ppo/kl_max"] > 0.2
    assert not math.isnan(metrics["ppo/kl"])
    changed = any(not torch.equal(p, q) for p, q in zip(before.parameters(), after.parameters()))
    assert changed  # the steps before the stop were taken


def test_without_max_kl_the_same_update_runs_every_step() -> None:
    model = _model()
    metrics = ppo_update(model, torch.optim.AdamW(model.parameters(), lr=0.5), _samples(),
                         PPOConfig(optimizer_steps=4, epochs=2, lr=0.5), pad_id=0)
    assert metrics["ppo/optimizer_steps"] == 8.0 and metrics["ppo/early_stopped"] == 0.0


def test_a_step_that_leaves_the_trust_region_is_undone() -> None:
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.5)
    metrics = ppo_update(model, optimizer, _samples(), PPOConfig(optimizer_steps=1, lr=0.5, max_kl=1e-4), pad_id=0)
    assert metrics["ppo/reverted_steps"] == 1.0 and metrics["ppo/optimizer_steps"] == 0.0
    assert metrics["ppo/kl_max"] > 1e-4
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # weights as before the step


def test_reference_kl_pulls_toward_the_reference_and_is_reported() -> None:
    reference = _model()
    model = _model()
    with torch.no_grad():  # move the policy away from the reference first
        for p in model.parameters():
            p.add_(0.05 * torch.sign(p))
    samples = [Sample(s.sample_id, s.prompt_ids, s.response_ids, 0.0) for s in _samples()]  # no policy gradient
    batch = make_batch(samples, 64, 0)

    def kl_to_reference() -> float:
        with torch.no_grad():
            d = token_logprobs(model, batch.input_ids_BL, batch.attention_mask_BL) - token_logprobs(
                reference, batch.input_ids_BL, batch.attention_mask_BL)
        k3 = (torch.exp(-d) - 1 + d) * batch.response_mask_BL
        return float(k3.sum() / batch.response_mask_BL.sum())

    before = kl_to_reference()
    cfg = PPOConfig(optimizer_steps=2, epochs=8, lr=3e-3, beta=0.0, ref_beta=1.0)
    metrics = ppo_update(model, torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0), samples, cfg, 0,
                         reference=reference)
    assert metrics["ppo/ref_kl"] > 0
    assert kl_to_reference() < 0.5 * before  # only the KL to the reference moved it, and toward the reference
