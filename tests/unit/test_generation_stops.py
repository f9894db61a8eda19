"""Where the hf generator stops (pure parts of services/common/models/generation.py)."""

from __future__ import annotations

from services.common.models.generation import cut_at_eos, eos_ids


def test_every_eos_id_of_the_generation_config_ends_the_turn() -> None:
    """Regression (field bugs, 8): only the tokenizer's eos id stopped generation; Llama-3/Qwen2-style
    configs list several (e.g. <|eot_id|> besides <|end_of_text|>)."""
    assert eos_ids(2, [2, 7, 9]) == [2, 7, 9]
    assert eos_ids(2, 7) == [2, 7]
    assert eos_ids(None, None) == []
    assert cut_at_eos([5, 6, 9, 4], eos_ids(2, [2, 9])) == (3, "stop")
    assert cut_at_eos([5, 6, 4], [2, 9]) == (3, "length")
    assert cut_at_eos([2], [2]) == (1, "stop")
