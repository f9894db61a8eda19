"""LoRA (peft) in the PPO trainer: only the adapters train, the reference is the base with the adapter
disabled, and a checkpoint is the adapter alone that loads over its base to the trained model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from services.common.algo.batching import Sample, make_batch
from services.common.config import LoraSettings, PPOConfig
from services.common.models.generation import HFGenerator
from services.common.models.loading import load_model
from services.common.models.logprobs import token_logprobs
from services.common.models.lora import is_adapter_checkpoint
from services.common.models.tiny import build_tiny_model, train_tokenizer
from services.common.trainer import PPOLearner

LORA = LoraSettings(rank=4, alpha=8)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizer = train_tokenizer([f"step {i}: move left right up down \\boxed{{{i % 4}}}" for i in range(200)], 300)
    return build_tiny_model(tokenizer, tmp_path_factory.mktemp("base") / "model", hidden_size=32, layers=2, heads=2)


def _samples(tokenizer) -> list[Sample]:
    out = []
    for i in range(12):
        prompt = tuple(tokenizer.encode(f"step {i}: move"))
        response = tuple(tokenizer.encode(f" left \\boxed{{{i % 4}}}"))
        out.append(Sample(f"s{i}", prompt, response, 1.0 if i % 2 else -1.0))
    return out


def _learner(base: Path, tmp_path: Path, **ppo) -> PPOLearner:
    cfg = PPOConfig(lr=5e-2, optimizer_steps=2, ref_beta=0.1, lora=LORA, **ppo)
    return PPOLearner(HFGenerator(str(base)), cfg, tmp_path / "ckpt", reference_source=str(base))


def test_only_the_adapters_train_and_the_base_stays(base: Path, tmp_path: Path) -> None:
    learner = _learner(base, tmp_path)
    frozen = {n: p.detach().clone() for n, p in learner.model.named_parameters() if "lora_" not in n}
    trainable = [n for n, p in learner.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    total = sum(p.numel() for p in learner.model.parameters())
    assert sum(p.numel() for group in learner.optimizer.param_groups for p in group["params"]) < total / 5
    metrics, uri = asyncio.run(learner.learn("policy", _samples(learner.generator.tokenizer), True, 1, None))
    assert metrics["ppo/optimizer_steps"] == 2.0 and metrics["ppo/ref_kl"] >= 0.0
    for n, p in learner.model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n  # the base weights never move


def test_the_reference_is_the_base_with_the_adapter_disabled(base: Path, tmp_path: Path) -> None:
    learner = _learner(base, tmp_path)
    base_model, tok = load_model(str(base))
    batch = make_batch(_samples(tok), 64, tok.pad_token_id)
    asyncio.run(learner.learn("policy", _samples(tok), True, 1, None))  # the adapter is no longer zero
    with torch.no_grad():
        want = token_logprobs(base_model, batch.input_ids_BL, batch.attention_mask_BL)
        with learner.reference() as ref:
            ref.eval()
            got = token_logprobs(ref, batch.input_ids_BL, batch.attention_mask_BL)
        trained = token_logprobs(learner.model.eval(), batch.input_ids_BL, batch.attention_mask_BL)
    torch.testing.assert_close(got, want)
    assert float((trained - want).abs().max()) > 1e-3  # outside the block the adapter is on again


def test_a_checkpoint_is_the_adapter_alone_and_loads_over_its_base_to_the_trained_model(base: Path,
                                                                                         tmp_path: Path) -> None:
    learner = _learner(base, tmp_path)
    v0 = Path(asyncio.run(learner.initial_uri("policy")))
    _, uri = asyncio.run(learner.learn("policy", _samples(learner.generator.tokenizer), True, 1, None))
    ckpt = Path(uri)
    assert is_adapter_checkpoint(ckpt) and is_adapter_checkpoint(v0) and not is_adapter_checkpoint(base)
    assert not (ckpt / "model.safetensors").exists()
    full = (base / "model.safetensors").stat().st_size
    assert (ckpt / "adapter_model.safetensors").stat().st_size < full / 3  # rank 4 of a width-32 model
    served = HFGenerator(str(base))
    served.load_version(str(ckpt), 1)  # what a rollout worker does on a new version
    tok = served.tokenizer
    batch = make_batch(_samples(tok), 64, tok.pad_token_id)
    with torch.no_grad():
        want = token_logprobs(learner.model.eval(), batch.input_ids_BL, batch.attention_mask_BL)
        got = token_logprobs(served.model, batch.input_ids_BL, batch.attention_mask_BL)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_lora_without_the_base_source_is_refused(base: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reference_source"):
        PPOLearner(HFGenerator(str(base)), PPOConfig(lora=LORA), tmp_path / "ckpt")


def test_every_lora_setting_reaches_the_adapter_config(base: Path) -> None:
    from services.common.models.lora import with_lora

    settings = LoraSettings(rank=3, alpha=5.0, target_modules=["q_proj", "v_proj"])
    model = with_lora(load_model(str(base))[0], settings, base)
    config = model.peft_config["default"]
    assert (config.r, config.lora_alpha, config.lora_dropout) == (3, 5.0, 0.0)
    assert set(config.target_modules) == {"q_proj", "v_proj"}


def test_the_adapters_start_from_the_seed_alone(base: Path) -> None:
    """Every rank of a sharded trainer (and a restarted one) must start from the same adapters: FSDP2
    keeps each rank's slice of its own copy, so ranks drawing different matrices would train a mix."""
    from services.common.models.lora import with_lora

    def first_matrices(seed: int) -> list[torch.Tensor]:
        torch.rand(int(torch.randint(1, 50, ()).item()))  # whatever the process drew before
        model = with_lora(load_model(str(base))[0], LORA, base, seed=seed)
        return [p.detach().clone() for n, p in model.named_parameters() if "lora_A" in n]

    state = torch.random.get_rng_state()
    a, b, c = first_matrices(7), first_matrices(7), first_matrices(8)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, z) for x, z in zip(a, c))
    torch.random.set_rng_state(state)
    torch.rand(int(torch.randint(1, 50, ()).item()))
    expected = torch.rand(3)
    torch.random.set_rng_state(state)
    first_matrices(7)
    assert torch.equal(torch.rand(3), expected)  # the global generator is as if no adapter was made


def test_adapter_dropout_is_refused_at_config_load() -> None:
    """π_old and the reference come from eval-mode passes: a dropout loss pass would see other log-probs."""
    with pytest.raises(ValueError, match=r"lora\.dropout=0\.1: only 0 is supported.*first ratio of every update"):
        LoraSettings(rank=4, dropout=0.1)


def test_an_adapter_as_the_source_is_refused_by_name(base: Path, tmp_path: Path) -> None:
    """It would be replaced by fresh adapters over its base (the reference the bare base) without a word."""
    from services.common.errors import ConfigError

    learner = _learner(base, tmp_path)
    _, uri = asyncio.run(learner.learn("policy", _samples(learner.generator.tokenizer), True, 1, None))
    with pytest.raises(ConfigError, match=r"model\.source .*v1' is a LoRA adapter .*rlanything run --resume"):
        PPOLearner(HFGenerator(uri), PPOConfig(lora=LORA), tmp_path / "again", reference_source=uri)


def test_a_tied_module_in_modules_to_save_is_refused(base: Path) -> None:
    from services.common.errors import ConfigError
    from services.common.models.lora import tied_modules, with_lora

    model = load_model(str(base))[0]
    assert model.config.tie_word_embeddings and tied_modules(model) == {"lm_head", "embed_tokens"}
    for name in ("lm_head", "embed_tokens"):
        with pytest.raises(ConfigError, match=rf"lora\.modules_to_save \['{name}'\]: tied to another module"):
            with_lora(load_model(str(base))[0], LoraSettings(rank=4, modules_to_save=[name]), base)
    wrapped = with_lora(model, LoraSettings(rank=4, modules_to_save=["norm"]), base)  # not tied: trained beside
    assert any("modules_to_save" in n for n, p in wrapped.named_parameters() if p.requires_grad)


def test_an_adapter_whose_tensors_match_no_module_is_refused_at_load(base: Path, tmp_path: Path) -> None:
    """The hf backend once served such an adapter as the bare base, reporting its LoRA modules loaded."""
    import shutil

    from safetensors.torch import load_file, save_file

    learner = _learner(base, tmp_path)
    _, uri = asyncio.run(learner.learn("policy", _samples(learner.generator.tokenizer), True, 1, None))
    model, _ = load_model(uri)  # the real one loads, every tensor checked
    bad = tmp_path / "wrapped"
    shutil.copytree(uri, bad)
    tensors = load_file(bad / "adapter_model.safetensors")
    save_file({k.replace(".self_attn.", ".self_attn._checkpoint_wrapped_module."): v for k, v in tensors.items()},
              str(bad / "adapter_model.safetensors"))
    with pytest.raises(ValueError, match=r"of the \d+ tensors of the adapter .* matched no module"):
        load_model(str(bad))


def test_exported_adapter_tensors_are_checked_by_shape() -> None:
    from services.common.models.lora import check_adapter_tensors

    good = {"m.q_proj.lora_A.weight": torch.zeros(4, 32), "m.q_proj.lora_B.weight": torch.zeros(32, 4)}
    check_adapter_tensors(good, 4)
    for key, value, why in [("m.q_proj.lora_A.weight", torch.zeros(128), r"shape \(128,\)"),
                            ("m.q_proj.lora_B.weight", torch.zeros(32, 0), r"shape \(32, 0\)"),
                            ("m.q_proj.lora_A.weight", torch.zeros(8, 32), r"rank 4 is 2-D with 4 rows")]:
        with pytest.raises(ValueError, match=rf"{key.replace('.', '[.]')} {why}|{why}"):
            check_adapter_tensors({**good, key: value}, 4)
    with pytest.raises(ValueError, match="holds no LoRA tensor"):
        check_adapter_tensors({"lm_head.weight": torch.zeros(2, 2)}, 4)


def test_a_version_that_scores_the_canary_other_than_its_trainer_is_not_served(base: Path, tmp_path: Path) -> None:
    """Each checkpoint carries the trainer's log-probs of a fixed probe; the hf backend scores it after
    loading and refuses a model that is not the trained one (here: the adapter's B matrices zeroed, so
    it computes the base), keeping the version it served."""
    import json
    import shutil

    from safetensors.torch import load_file, save_file

    from services.common.models.canary import CANARY_DIFF, CanaryError

    learner = _learner(base, tmp_path)
    for v in (1, 2):
        _, uri = asyncio.run(learner.learn("policy", _samples(learner.generator.tokenizer), True, v, None))
    canary = json.loads((Path(uri) / "canary.json").read_text())
    assert len(canary["logprobs"]) >= 5 and all(v <= 0 for v in canary["logprobs"])
    served = HFGenerator(str(base))
    served.load_version(uri, 2)
    assert served.model_version == 2 and CANARY_DIFF.labels("policy")._value.get() <= 1e-5
    stale = tmp_path / "ckpt" / "policy" / "v3"
    shutil.copytree(uri, stale)
    tensors = load_file(stale / "adapter_model.safetensors")
    save_file({k: torch.zeros_like(v) if "lora_B" in k else v for k, v in tensors.items()},
              str(stale / "adapter_model.safetensors"))
    with pytest.raises(CanaryError, match=r"v3 scores the canary probe other than its trainer did .* not served"):
        served.load_version(str(stale), 3)
    assert served.model_version == 2 and CANARY_DIFF.labels("policy")._value.get() > 1e-3
