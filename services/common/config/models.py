"""Config of the models both learners have: the model and its backend, PPO, supervised cold start."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from services.common.config.base import StrictModel

__all__ = ["TinyModelConfig", "VLLMConfig", "ModelConfig", "LoraSettings", "PPOConfig", "SFTConfig",
           "serve_lora_in_vllm"]


class TinyModelConfig(StrictModel):
    """A tiny Qwen2-style decoder built from scratch with a tokenizer trained on the family's text."""

    hidden_size: int = Field(128, ge=16, description="Model width.")
    layers: int = Field(2, ge=1, description="Decoder layers.")
    heads: int = Field(4, ge=1, description="Attention heads.")
    vocab_size: int = Field(512, ge=300, description="Byte-level BPE vocabulary (keep it small on CPU).")


class VLLMConfig(StrictModel):
    """Engine settings of the `vllm` backend (vLLM's `LLM(...)` arguments of the same names)."""

    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Weights and activations; float32 matches the CPU trainer's log-probs most closely.")
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1, description="Share of GPU memory the engine may take.")
    max_model_len: int = Field(0, ge=0, description="Context window in tokens (0 = the model's own).")
    enforce_eager: bool = Field(False, description="No CUDA graphs / compilation: faster start, slower steps.")
    max_lora_rank: int = Field(
        0, ge=0, le=512, description="LoRA in the engine (enable_lora): the largest adapter rank it serves, 0 = no "
                                     "LoRA. The policy and reward configs set it to their ppo.lora.rank when that "
                                     "trains adapters, so each adapter version is hot-loaded, not merged.")


class ModelConfig(StrictModel):
    """Which model a service runs, and through which generation backend."""

    backend: Literal["hf", "vllm", "openai"] = Field("hf", description="Generation backend.")
    source: str = Field(
        "", description="Local HF directory, hub id, 'smollm2', or '' for the tiny model built from the family.")
    cache_dir: str = Field(".cache/models", description="Where built/converted models are cached.")
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig)
    openai_base_url: str = Field("", description="openai backend: the server's /v1 URL.")
    openai_model: str = Field("", description="openai backend: the model name to request.")
    openai_api_key_env: str = Field("OPENAI_API_KEY", description="Env variable holding the API key.")
    threads: int = Field(0, ge=0, description="torch CPU threads (0 = torch's default).")
    device: str = Field("cpu", description="torch device for hf: 'cpu' or 'cuda'.")
    vllm: VLLMConfig = Field(default_factory=VLLMConfig)
    sampling_defaults: Literal["neutral"] = Field(
        "neutral", description="Every sampling field the run config does not set (repetition penalty, top_k, "
                               "min_p, ...) at its no-op value, the same in every backend; a checkpoint's "
                               "generation_config.json contributes its end-of-turn ids only (recorded, not a "
                               "choice: services.common.models.sampling_convention).")
    logprobs_mode: Literal["raw_logprobs"] = Field(
        "raw_logprobs", description="Behaviour log-probs: the sampled token's log-prob under the model at "
                                    "temperature 1, before temperature, top-p or penalties (the trainer's "
                                    "convention; recorded, not a choice).")


class LoraSettings(StrictModel):
    """Low-rank adapters (peft's LoRA, Hu et al. 2021) instead of a full fine-tune: the trainer trains and
    ships the adapter only, and the KL reference is the base with the adapter disabled."""

    rank: int = Field(0, ge=0, le=1024, description="Adapter rank r (0 = no adapter: full fine-tune).")
    alpha: float = Field(32.0, gt=0, description="Scale numerator: the adapter's output is scaled by alpha / rank.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapter's input: 0 only (see the check below).")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        min_length=1, description="Names of the linear layers that get an adapter (Llama/Qwen2 names by default).")
    modules_to_save: list[str] = Field(
        default_factory=list, description="Modules trained in full beside the adapters and saved with them "
                                          "(e.g. a norm; a module tied to another, such as lm_head and "
                                          "embed_tokens under tie_word_embeddings, is refused when the model loads).")

    @field_validator("dropout")
    @classmethod
    def _no_dropout(cls, value: float) -> float:
        if value:
            raise ValueError(
                f"lora.dropout={value}: only 0 is supported. The trainer's π_old and reference log-probs come from "
                "eval-mode passes (no dropout), so a loss pass with dropout computes other log-probs and the first "
                "ratio of every update is dropout noise, not the policy's change (measured with 0.1: off by up to "
                "0.0104 after one update); clip and KL would act on it. Regularise with ppo.ref_beta instead.")
        return value


class PPOConfig(StrictModel):
    """PPO-clip with the k3 KL term (docs/algorithm.md, training step); used by both trainers."""

    eps: float = Field(0.2, gt=0, lt=1, description="Clip range ε.")
    beta: float = Field(0.01, ge=0, description="KL coefficient β (k3 estimator).")
    ref_beta: float = Field(
        0.0, ge=0, description="Weight of a k3 KL to the starting weights (version 0), as GRPO's KL to its initial "
                               "model (0 = the paper: KL to π_old only). Anchors the answer format.")
    dual_clip: float = Field(
        3.0, ge=0, description="Dual-clip c for A < 0 (surrogate >= c·A; 0 = off, the paper's loss): bounds the "
                               "gradient of a token whose probability rose far within a round.")
    lr: float = Field(3e-4, gt=0, description="AdamW learning rate (tiny CPU models need ~1e-4..1e-3).")
    optimizer_steps: int = Field(4, ge=1, description="Optimizer steps per round: the data is split in this many minibatches.")
    epochs: int = Field(1, ge=1, le=64, description="Passes over the round's data (optimizer_steps minibatches each).")
    warmup_steps: int = Field(
        0, ge=0, description="Linear lr warm-up over the trainer's first optimizer steps (0 = none): Adam's first "
                             "steps move every weight by the full lr.")
    max_kl: float = Field(
        0.0, ge=0, description="Trust region: stop the update before a minibatch whose KL(π_old‖π_θ) exceeds this, "
                               "and undo a step that takes its minibatch above it (0 = off, the paper).")
    backtrack_steps: int = Field(
        0, ge=0, le=16, description="With max_kl: a step that leaves the trust region is retried this many times, "
                                    "each with the lr times backtrack_ratio (TRPO's backtracking line search), "
                                    "before it is undone (0 = undo at once).")
    backtrack_ratio: float = Field(0.5, gt=0, lt=1, description="The lr factor of each backtracking retry.")
    trust_region: Literal["minibatch", "batch"] = Field(
        "minibatch", description="With max_kl: where a step's KL is checked after it is taken: 'minibatch' = on the "
                                 "samples it trained on; 'batch' = on all of the round's samples (TRPO's mean KL over "
                                 "the batch: a step may not move the other minibatches' answers far either), one "
                                 "forward pass over the batch per step.")
    grad_clip: float = Field(1.0, gt=0, description="Gradient-norm clip.")
    merge_duplicates: bool = Field(
        True, description="Train identical (prompt, response) samples with same-sign advantages once, weighted by "
                          "their count: the same loss, about a third of the forward/backward work on FrozenLake.")
    max_length: int = Field(1024, ge=2, description="Samples longer than this (tokens) are dropped with their advantage.")
    micro_batch_tokens: int = Field(
        0, ge=0, description="Tokens of one forward/backward pass (rows × longest row): a minibatch is cut into "
                             "micro-batches under this budget and their gradients accumulated, the loss weighted as "
                             "over the whole minibatch, so the update does not depend on the cut (0 = one pass).")
    min_samples_async: int = Field(64, ge=1, description="async mode: train once this many samples are stored.")
    reference: Literal["resident", "reload"] = Field(
        "resident", description="Where the reference of ref_beta lives: 'resident' = a second copy of the starting "
                                "model in memory (4 bytes/param in fp32); 'reload' = loaded from the starting model "
                                "for each update's reference pass and freed before the optimizer steps (a load per "
                                "update, no memory during the steps).")
    lora: LoraSettings = Field(default_factory=LoraSettings, description="LoRA adapters (rank 0 = full fine-tune).")
    gradient_checkpointing: bool = Field(
        False, description="Recompute each layer's activations in the backward pass instead of keeping them "
                           "(transformers' gradient checkpointing): less memory, about a third more compute.")
    autocast: Literal["none", "bf16"] = Field(
        "none", description="'bf16': the trainer's forward passes under torch.autocast in bfloat16 (weights, "
                            "gradients and AdamW state stay fp32); 'none' = fp32 throughout.")
    malloc_mmap_threshold: int = Field(
        0, ge=0, le=32 * 1024 * 1024,
        description="Bytes: the trainer process fixes glibc's mmap threshold at this size, so every freed tensor "
                    "above it returns its memory at once, at a cost in speed (each is a fresh mapping: the update "
                    "took 1.09-1.48x as long, median 1.37x, and greedy generation 1.19-7.1x in bench/trainer_memory.md, "
                    "for up to 1 B/param less at the peak of a lean full fine-tune). 0 = glibc's dynamic default.")
    collective_timeout_s: float = Field(
        1800.0, gt=0, description="A trainer on several torchrun processes: seconds any collective (and so a "
                                  "rank's wait for the next command) may take before the group is declared broken; "
                                  "rank 0 sends a heartbeat every min(60 s, a quarter of it).")

    @model_validator(mode="after")
    def _dual_clip_above_one(self) -> "PPOConfig":
        if 0 < self.dual_clip <= 1:
            raise ValueError(f"dual_clip must be 0 (off) or > 1, got {self.dual_clip}")
        return self


class SFTConfig(StrictModel):
    """Cold start: supervised steps on the environment's expert trajectories."""

    episodes: int = Field(600, ge=1, description="Expert episodes (maps, games, questions) to learn from.")
    steps: int = Field(300, ge=0, description="Optimizer steps (stop short of mastery).")
    batch_size: int = Field(32, ge=1, description="Samples per step.")
    lr: float = Field(1e-3, gt=0, description="AdamW learning rate.")
    eval_episodes: int = Field(100, ge=1, description="Held-out episodes to measure success before/after.")


def serve_lora_in_vllm(section: str, model: ModelConfig, ppo: PPOConfig) -> None:
    """Start a `vllm` engine of ``model`` with LoRA when ``ppo`` trains adapters (a service config's check).

    ``model.vllm.max_lora_rank`` 0 becomes ``ppo.lora.rank``, so every adapter the trainer announces is
    hot-loaded by the engine; another backend, or no LoRA, leaves ``model`` as it is.

    Raises:
        ValueError: an explicit ``max_lora_rank`` below the trained rank, or ``lora.modules_to_save``
            (vLLM's LoRA serves low-rank adapters only, not whole trained modules).
    """
    rank = ppo.lora.rank
    if model.backend != "vllm" or rank == 0:
        return
    if ppo.lora.modules_to_save:
        raise ValueError(f"{section}.ppo.lora.modules_to_save {ppo.lora.modules_to_save} cannot be served by "
                         f"{section}.model.backend 'vllm' (vLLM's LoRA takes low-rank adapters only): leave it "
                         "empty or use backend 'hf'")
    if model.vllm.max_lora_rank == 0:
        model.vllm.max_lora_rank = rank
    elif model.vllm.max_lora_rank < rank:
        raise ValueError(f"{section}.model.vllm.max_lora_rank={model.vllm.max_lora_rank} is below "
                         f"{section}.ppo.lora.rank={rank}: the engine could not load the trainer's adapters "
                         "(set it to 0 to follow ppo.lora.rank)")
