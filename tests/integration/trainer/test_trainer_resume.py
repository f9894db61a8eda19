"""A restarted trainer goes on from the announced version: the weights it resumes equal that version's
checkpoint bit for bit, and the version it trains next equals the one an uninterrupted trainer
trains (the AdamW state and step counts came back too); full fine-tuning and LoRA, one process and
two torchrun ranks. Without a saved state, or with one that does not fit, it refuses to start."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from services.common.algo.batching import Sample
from services.common.config import LoraSettings, PPOConfig
from services.common.errors import ResumeError
from services.common.models.generation import HFGenerator
from services.common.models.tiny import build_tiny_model, train_tokenizer
from services.common.trainer import PPOLearner
from services.common.trainer_state import state_root
from tests.integration.trainer.dp_case import lora_learner, samples as dp_samples
from tests.integration.trainer.test_data_parallel import torchrun

pytestmark = pytest.mark.integration

FULL = PPOConfig(lr=1e-2, optimizer_steps=2, ref_beta=0.1, warmup_steps=3)
LORA = FULL.model_copy(update={"lr": 5e-2, "lora": LoraSettings(rank=4, alpha=8)})


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizer = train_tokenizer([f"step {i}: move left right up down \\boxed{{{i % 4}}}" for i in range(200)], 300)
    return build_tiny_model(tokenizer, tmp_path_factory.mktemp("base") / "model", hidden_size=32, layers=2, heads=2)


def samples(learner: PPOLearner, version: int) -> list[Sample]:
    tok = learner.generator.tokenizer
    return [Sample(f"v{version}s{i}", tuple(tok.encode(f"step {i + version}: move")),
                   tuple(tok.encode(f" left \\boxed{{{(i + version) % 4}}}")), 1.0 if (i + version) % 2 else -1.0)
            for i in range(8)]


def learner(base: Path, ckpt: Path, cfg: PPOConfig) -> PPOLearner:
    """A learner built as the services' ``on_start`` builds it: from the source, every time."""
    return PPOLearner(HFGenerator(str(base)), cfg, ckpt, seed=3, reference_source=str(base))


def train(lrn: PPOLearner, versions: range) -> dict[int, str]:
    uris = {}
    for v in versions:
        uris[v] = lrn.learn_now("policy", samples(lrn, v), True, v, None)[1] if v else lrn.save("policy", 0)
    return uris


def checkpoint_tensors(uri: str) -> dict[str, torch.Tensor]:
    name = "adapter_model.safetensors" if (Path(uri) / "adapter_model.safetensors").exists() else "model.safetensors"
    return load_file(Path(uri) / name)


def held(lrn: PPOLearner) -> dict[str, torch.Tensor]:
    """The learner's trainable weights under the names its checkpoint uses (peft drops the adapter name)."""
    return {n.replace(".default", ""): p.detach() for n, p in lrn.model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("cfg", [FULL, LORA], ids=["full", "lora"])
def test_a_restarted_trainer_trains_the_next_version_an_uninterrupted_one_trains(base: Path, tmp_path: Path,
                                                                                cfg: PPOConfig) -> None:
    going = learner(base, tmp_path / "a", cfg)
    train(going, range(0, 4))
    v3 = going.weights_sha256
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # what a trainer killed after announcing v3 left behind
    going.learn_now("policy", samples(going, 4), True, 4, None)

    restarted = learner(base, tmp_path / "b", cfg)
    restarted.resume_now("policy", 3)
    assert restarted.lineage == ("", v3) and restarted.steps_done() == 6  # 3 versions × 2 optimizer steps
    on_disk = checkpoint_tensors(str(tmp_path / "b" / "policy" / "v3"))
    resumed = held(restarted)
    assert set(resumed) <= set(on_disk) and len(resumed) >= 8
    for name, value in resumed.items():
        assert torch.equal(value, on_disk[name]), name  # v3's weights bit for bit
    _, uri = restarted.learn_now("policy", samples(restarted, 4), True, 4, None)
    assert restarted.lineage == (v3, going.weights_sha256)  # v4 is the v4 of the trainer that never stopped
    want = checkpoint_tensors(str(tmp_path / "a" / "policy" / "v4"))
    got = checkpoint_tensors(uri)
    assert sorted(got) == sorted(want)
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert max(float((want[k] - on_disk[k]).abs().max()) for k in on_disk if k in want) > 1e-4  # v4 moved


def test_today_s_cold_start_after_a_restart_would_not_match(base: Path, tmp_path: Path) -> None:
    """The outcome the resume fixes, shown: a learner that is not resumed trains v4 from the source."""
    going = learner(base, tmp_path / "a", FULL)
    train(going, range(0, 4))
    cold = learner(base, tmp_path / "c", FULL)
    cold.learn_now("policy", samples(cold, 4), True, 4, None)
    assert cold.lineage[0] == "" and cold.weights_sha256 != going.weights_sha256


def test_a_version_trained_on_nothing_and_a_save_never_announced_resume_right(base: Path, tmp_path: Path) -> None:
    lrn = learner(base, tmp_path / "a", FULL)
    uris = train(lrn, range(0, 2))
    lrn.learn_now("policy", [], True, 2, uris[1])  # an evaluation round: v2 = v1's weights
    v2 = lrn.weights_sha256
    lrn.learn_now("policy", samples(lrn, 3), True, 3, None)  # saved, then killed before announcing v3
    again = learner(base, tmp_path / "a", FULL)
    again.resume_now("policy", 2)
    assert again.lineage[1] == v2 and again.steps_done() == 2
    assert not (state_root(tmp_path / "a", "policy") / "previous").exists()  # the unannounced v3 was dropped
    again.learn_now("policy", samples(again, 3), True, 3, None)
    assert again.weights_sha256 == lrn.weights_sha256


def test_a_missing_or_unfitting_state_is_refused_by_name(base: Path, tmp_path: Path) -> None:
    lrn = learner(base, tmp_path / "a", LORA)
    train(lrn, range(0, 2))
    with pytest.raises(ResumeError, match=r"cannot resume from the announced version v5: no saved trainer state "
                                          r"covers it under .*trainer \(found latest: v1\.\.v1, previous: v0\.\.v0\)"):
        learner(base, tmp_path / "a", LORA).resume_now("policy", 5)
    other_rank = LORA.model_copy(update={"lora": LoraSettings(rank=8, alpha=16)})
    with pytest.raises(ResumeError, match=r"does not fit the model being trained"):
        learner(base, tmp_path / "a", other_rank).resume_now("policy", 1)
    shutil.rmtree(state_root(tmp_path / "a", "policy"))
    with pytest.raises(ResumeError, match=r"v1: no saved trainer state covers it .*\(found nothing\)"):
        learner(base, tmp_path / "a", LORA).resume_now("policy", 1)


def test_a_state_saved_by_one_process_resumes_on_two_ranks(base: Path, tmp_path: Path) -> None:
    """DCP re-shards: two FSDP2 ranks resume one process's v1 (bit for bit: the digest of what they hold)
    and train a v2 equal to the one-process v2 up to float summation order."""
    one = lora_learner(str(base), str(tmp_path / "one"))
    one.save("policy", 0)
    one.learn_now("policy", dp_samples(), True, 1, None)
    v1 = one.weights_sha256
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    one.learn_now("policy", dp_samples(), True, 2, None)
    out = tmp_path / "two.pt"
    torchrun(str(out), str(base), str(tmp_path / "two"), "resume")
    two = torch.load(out)
    assert two["world"] == 2 and two["resumed"] == v1 and two["lineage"][0] == v1
    want = checkpoint_tensors(str(tmp_path / "one" / "policy" / "v2"))
    got = checkpoint_tensors(two["uri"])
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        torch.testing.assert_close(got[name], value, rtol=1e-4, atol=5e-5, msg=name)
