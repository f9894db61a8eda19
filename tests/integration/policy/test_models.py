"""Model loading and generation (no services): HF directories, behaviour log-probs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from services.common.models import loading
from services.common.models.generation import HFGenerator, Sampling
from services.common.models.logprobs import token_logprobs

pytestmark = pytest.mark.integration


def test_saved_directory_loads_through_the_hub_id_code_path(tiny_model_dir: Path, monkeypatch) -> None:
    seen: list[str] = []
    real = loading.AutoModelForCausalLM.from_pretrained

    def spy(path, **kw):  # the same transformers call a hub id goes through
        seen.append(path)
        return real(path, **kw)

    monkeypatch.setattr(loading.AutoModelForCausalLM, "from_pretrained", spy)
    assert loading.resolve_model_path(str(tiny_model_dir)) == str(tiny_model_dir)
    assert loading.resolve_model_path("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    model, tok = loading.load_model(str(tiny_model_dir))
    assert seen == [str(tiny_model_dir)]
    assert model.config.model_type == "qwen2" and tok.eos_token == "<|im_end|>"
    assert len(loading.checkpoint_sha256(tiny_model_dir)) == 64


def test_behaviour_logprobs_match_a_recomputation_with_padding(tiny_model_dir: Path) -> None:
    gen = HFGenerator(str(tiny_model_dir))
    chats = [[{"role": "user", "content": "Task: short"}],
             [{"role": "user", "content": "Task: a much longer prompt that forces left padding of the first"}]]
    outs = gen.generate(chats, Sampling(temperature=1.0, max_new_tokens=12, seed=3))
    for c in outs:
        assert len(c.token_ids) == len(c.logprobs) > 0
        ids = torch.tensor([list(c.prompt_token_ids) + list(c.token_ids)])
        again = token_logprobs(gen.model, ids, torch.ones_like(ids))[0, len(c.prompt_token_ids):]
        assert torch.allclose(again, torch.tensor(c.logprobs), atol=1e-4)


def test_greedy_is_deterministic_and_stop_strings_cut(tiny_model_dir: Path) -> None:
    gen = HFGenerator(str(tiny_model_dir))
    chat = [[{"role": "user", "content": "Task: walk"}]]
    a = gen.generate(chat, Sampling(temperature=0.0, max_new_tokens=10))
    b = gen.generate(chat, Sampling(temperature=0.0, max_new_tokens=10))
    assert a == b
    text = a[0].text
    assert len(text) >= 3, f"the greedy answer {text!r} is too short to cut"
    stop = text[1:3]
    cut = gen.generate(chat, Sampling(temperature=0.0, max_new_tokens=10, stop=(stop,)))[0]
    assert cut.text == text[: text.index(stop)] and cut.finish_reason == "stop"
    assert len(cut.token_ids) < len(a[0].token_ids)  # generation stopped early, not only the text cut


def test_repeated_prompts_share_one_prefill_and_answer_as_alone(tiny_model_dir: Path) -> None:
    """A batch that repeats prompts (m judge votes, G rollouts from one start) prefills each distinct
    prompt once; greedy answers and behaviour log-probs equal those of each prompt generated alone."""
    from services.common.models.generation import shared_prefill, shared_rows

    gen = HFGenerator(str(tiny_model_dir))
    short = [{"role": "user", "content": "Task: short"}]
    long = [{"role": "user", "content": "Task: a much longer prompt that forces left padding of the first"}]
    batch = [short, long, short, long, short]
    assert shared_rows([gen.encode_chat(c) for c in batch]) == ([0, 1], [0, 1, 0, 1, 0])
    greedy = Sampling(temperature=0.0, max_new_tokens=8)
    together = gen.generate(batch, greedy)
    alone = {id(c): gen.generate([c], greedy)[0] for c in (short, long)}
    for chat, got in zip(batch, together):
        ref = alone[id(chat)]
        assert got.text == ref.text and got.token_ids == ref.token_ids
        assert torch.allclose(torch.tensor(got.logprobs), torch.tensor(ref.logprobs), atol=1e-4)
    # the cache is built only when a prompt repeats, and it holds every row but the last prompt token
    prompts = [gen.encode_chat(c) for c in (short, long)]
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    att = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    assert shared_prefill(gen.model, ids, att, prompts) is None
    cache = shared_prefill(gen.model, ids[[0, 0, 1]], att[[0, 0, 1]], [prompts[0], prompts[0], prompts[1]])
    assert cache.get_seq_length() == width - 1 and cache.layers[0].keys.shape[0] == 3
    # sampled repeats are drawn independently: 8 copies of one prompt do not all answer alike
    sampled = gen.generate([short] * 8, Sampling(temperature=1.0, max_new_tokens=8, seed=1))
    assert len({c.token_ids for c in sampled}) > 1


def test_seeded_chats_sample_the_same_tokens_whatever_batch_they_share(tiny_model_dir: Path) -> None:
    """A rollout worker merges concurrent jobs' steps into calls whose make-up depends on timing;
    per-chat seeds keep each chat's draw its own (random weights, temperature 1: high entropy)."""
    gen = HFGenerator(str(tiny_model_dir))
    a = [{"role": "user", "content": "Task: walk to G"}]
    b = [{"role": "user", "content": "Task: a much longer prompt that pads the other rows of the batch"}]
    s = Sampling(temperature=1.0, max_new_tokens=10)
    alone = gen.generate([a, a, a], s, seeds=[11, 12, 13])
    mixed = gen.generate([b, a, b, a, a], s, seeds=[5, 12, 6, 13, 11])
    assert [c.token_ids for c in alone] == [mixed[4].token_ids, mixed[1].token_ids, mixed[3].token_ids]
    assert len({c.token_ids for c in alone}) == 3  # the seeds do differ in what they draw
    for c in mixed:  # behaviour log-probs are still the model's at temperature 1
        ids = torch.tensor([list(c.prompt_token_ids) + list(c.token_ids)])
        again = token_logprobs(gen.model, ids, torch.ones_like(ids))[0, len(c.prompt_token_ids):]
        assert torch.allclose(again, torch.tensor(c.logprobs), atol=1e-4)
    with pytest.raises(ValueError, match="one seed per chat: 2 seeds for 3 chats"):
        gen.generate([a, a, a], s, seeds=[1, 2])
