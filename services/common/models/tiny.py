"""Tiny Qwen2-style decoders with a small byte-level BPE tokenizer trained on a family's own text.

No downloads: the tokenizer is trained with the `tokenizers` library in a fraction of a second
and the model is built from a `transformers.Qwen2Config`. The result is saved as a regular
Hugging Face directory (config, safetensors, tokenizer with a ChatML chat template), so every
later step loads it through the same code path as a hub model.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

__all__ = ["CHATML_TEMPLATE", "SPECIAL_TOKENS", "train_tokenizer", "build_tiny_model"]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on ``texts`` with ChatML special tokens and template.

    Keep ``vocab_size`` small (hundreds): a 32k vocabulary makes a tiny model's step ~40× slower.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None)
    fast.chat_template = CHATML_TEMPLATE
    return fast


def build_tiny_model(tokenizer: PreTrainedTokenizerFast, out_dir: str | Path, hidden_size: int = 128,
                     layers: int = 2, heads: int = 4, max_positions: int = 2048, seed: int = 0) -> Path:
    """Build a randomly initialised Qwen2-style decoder for ``tokenizer`` and save both.

    Returns:
        ``out_dir`` (a Hugging Face model directory).
    """
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 4,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=max_positions, tie_word_embeddings=True,
        bos_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
