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


def test_a_cancel_event_gives_up_waiting_for_the_model() -> None:
    import threading
    import time

    import pytest

    from services.common.models.generation import GenerationCancelled, acquire_unless_cancelled

    lock, cancel = threading.Lock(), threading.Event()
    lock.acquire()  # another request holds the model
    threading.Timer(0.2, cancel.set).start()
    start = time.monotonic()
    with pytest.raises(GenerationCancelled):
        acquire_unless_cancelled(lock, cancel)
    assert 0.15 < time.monotonic() - start < 1.0
    lock.release()
    acquire_unless_cancelled(lock, threading.Event())  # free and not cancelled: taken
    assert lock.locked()
    lock.release()
    with pytest.raises(GenerationCancelled):  # free but cancelled: not taken
        acquire_unless_cancelled(lock, cancel)
    assert not lock.locked()
