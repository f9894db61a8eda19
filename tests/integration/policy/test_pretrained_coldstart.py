"""Cold start of a given (pretrained) source: full and LoRA SFT saved as full weights, cached once by key.

The session's tiny model stands in for the pretrained source (SmolLM2 is too slow for this tier); the
code path is the one `policy.sft.source: smollm2` takes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

from services.common.config import FamilyConfig, LoraSettings, RunConfig, SFTConfig, TinyModelConfig
from services.common.models.generation import HFGenerator
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.policy_sft import demonstrations, run_sft
from services.run import coldstart

FAMILY = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})
SFT = SFTConfig(episodes=30, steps=25, batch_size=16, lr=1e-2, eval_episodes=2)
HISTORY = 2  # the tiny_model_dir fixture's tokenizer was trained on prompts with 2 history steps


def _weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(str(directory / "model.safetensors"))


def _expert_nll(model_dir: Path) -> float:
    """Mean negative log-likelihood (nats per token) of expert answers under the model in ``model_dir``."""
    generator = HFGenerator(str(model_dir))
    model, tok = generator.model, generator.tokenizer
    total, count = 0.0, 0
    with torch.no_grad():
        for demo in demonstrations(FrozenLakeFamily(), FAMILY, 10, HISTORY)[:40]:
            prompt = generator.encode_chat(demo.chat)
            answer = tok.encode(demo.response, add_special_tokens=False) + [tok.eos_token_id]
            ids = torch.tensor([prompt + answer])
            logp = torch.log_softmax(model(input_ids=ids).logits[0, len(prompt) - 1:-1].float(), dim=-1)
            total -= float(logp.gather(1, torch.tensor(answer).view(-1, 1)).sum())
            count += len(answer)
    return total / count


def test_lora_sft_of_a_source_is_merged_into_full_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    lora = LoraSettings(rank=8, alpha=16.0, target_modules=["q_proj", "v_proj", "down_proj"])
    out = tmp_path / "cold"
    result = run_sft(FrozenLakeFamily(), FAMILY, SFT, TinyModelConfig(), out, HISTORY, source=str(tiny_model_dir),
                     lora=lora, eval_tokens=8)
    assert not (out / "adapter_config.json").exists()  # a full model, loadable without its base
    before, after = _weights(tiny_model_dir), _weights(out)
    assert set(after) == set(before)  # no lora_A / lora_B tensors left
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert changed and all(name.endswith(("q_proj.weight", "v_proj.weight", "down_proj.weight")) for name in changed)
    assert any("k_proj" in name for name in before)  # an untargeted projection stayed as it was
    assert _expert_nll(out) < 0.85 * _expert_nll(tiny_model_dir)  # measured: 6.08 -> 4.86 nats/token
    assert (result.steps, result.model_dir) == (25, str(out))
    assert 0.0 <= result.success_before <= 1.0 and 0.0 <= result.success_after <= 1.0


def test_full_sft_of_a_source_trains_every_weight_from_the_source(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "cold"
    run_sft(FrozenLakeFamily(), FAMILY, SFT.model_copy(update={"steps": 10}), TinyModelConfig(), out, HISTORY,
            source=str(tiny_model_dir), eval_tokens=8)
    before, after = _weights(tiny_model_dir), _weights(out)
    assert AutoTokenizer.from_pretrained(out).get_vocab() == AutoTokenizer.from_pretrained(tiny_model_dir).get_vocab()
    changed = [name for name in before if not torch.equal(before[name], after[name])]
    assert len(changed) == len(before)
    assert _expert_nll(out) < _expert_nll(tiny_model_dir)


def test_lora_without_a_source_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="LoRA SFT needs a pretrained source"):
        run_sft(FrozenLakeFamily(), FAMILY, SFT, TinyModelConfig(), tmp_path / "x", HISTORY,
                lora=LoraSettings(rank=4))


def test_the_run_cold_start_builds_a_source_once_then_finds_it_cached(tiny_model_dir: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "pretrained"
    shutil.copytree(tiny_model_dir, source)
    config = RunConfig.model_validate({
        "env": {"families": [FAMILY.model_dump(mode="json")]},
        "policy": {"sft": {**SFT.model_dump(mode="json"), "steps": 5, "source": str(source), "lora_rank": 4},
                   "rollout": {"history_steps": HISTORY}, "ppo": {"lora": {"target_modules": ["q_proj"]}}},
        "launcher": {"coldstart_dir": str(tmp_path / "coldstart")}})
    said: list[str] = []
    first = coldstart.coldstart_policy(config, said.append)
    assert Path(first).name.startswith("policy-gym_text-pretrained-")
    assert "SFT of " + str(source) + " (LoRA r=4, merged)" in said[0]
    assert (Path(first) / "model.safetensors").exists()

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cached cold start was trained again")

    monkeypatch.setattr("services.offline.policy_sft.run_sft", no_training)
    said.clear()
    assert coldstart.coldstart_policy(config.model_copy(update={"seed": 3}), said.append) == first
    assert said == [f"cold-started policy: cached {first}"]


def test_the_run_cold_start_refuses_an_inconsistent_config(tmp_path: Path) -> None:
    config = RunConfig.model_validate({"env": {"families": [FAMILY.model_dump(mode="json")]},
                                       "policy": {"sft": {"source": "smollm2"}, "model": {"source": "smollm2"}},
                                       "launcher": {"coldstart_dir": str(tmp_path)}})
    with pytest.raises(ValueError, match="both name the policy"):
        coldstart.coldstart_policy(config, print)
    assert list(tmp_path.iterdir()) == []


def test_a_success_target_stops_at_the_first_check_that_meets_it(tiny_model_dir: Path, tmp_path: Path) -> None:
    """`supervised_train` with ``until``: measured at each check point, stopped at the first that
    answers True, with the weights of a plain run of that many steps (one optimizer throughout)."""
    from services.offline.policy_sft import supervised_train

    demos = demonstrations(FrozenLakeFamily(), FAMILY, 30, HISTORY)
    sft = SFT.model_copy(update={"steps": 6})
    asked: list[tuple[int, bool]] = []
    stopped = HFGenerator(str(tiny_model_dir))

    def until(steps: int) -> bool:
        asked.append((steps, stopped.model.training))
        return steps >= 10

    taken = supervised_train(stopped, demos, sft, seed=1, until=until, checks=[6, 8, 10, 12, 14])
    assert taken == 10 and asked == [(6, False), (8, False), (10, False)]  # measured in eval mode
    plain = HFGenerator(str(tiny_model_dir))
    assert supervised_train(plain, demos, sft.model_copy(update={"steps": 10}), seed=1) == 10
    for (name, p), q in zip(stopped.model.named_parameters(), plain.model.parameters()):
        torch.testing.assert_close(p, q, msg=name)


def test_an_unreached_target_trains_to_max_steps_and_reports_the_last_measure(tiny_model_dir: Path,
                                                                             tmp_path: Path) -> None:
    checks: list[float] = []
    result = run_sft(FrozenLakeFamily(), FAMILY, SFT.model_copy(update={"steps": 4}), TinyModelConfig(),
                     tmp_path / "cold", HISTORY, source=str(tiny_model_dir), eval_tokens=8,
                     progress=lambda kind, value: checks.append(value) if kind == "check" else None,
                     target_success=1.0, max_steps=9, check_every=2)
    # checks after 4, 6, 8 and 9 steps; a tiny model on 2 maps after 9 steps does not win every one
    assert result.steps == 9 and len(checks) == 4
    assert result.success_after == checks[-1] < 1.0
