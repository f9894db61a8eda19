"""Tokens to text one token at a time (services/common/models/detokenize.py, pure)."""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from services.common.models.detokenize import ContentBuilder, TextStream, token_bytes_of
from services.common.models.tiny import train_tokenizer

EOS = 99


def _push_all(stream: TextStream, parts: list[bytes]) -> list[str]:
    return [stream.push(p) for p in parts] + [stream.push(b"", final=True)]


def test_text_that_may_start_a_stop_string_is_held_back_and_released_when_it_cannot() -> None:
    s = TextStream(("END",))
    assert _push_all(s, [b"ab", b"E", b"N", b"x", b"E"]) == ["ab", "", "", "ENx", "", "E"]
    assert not s.stopped


def test_a_stop_string_across_tokens_ends_the_text_before_it() -> None:
    s = TextStream(("END", "xy"))
    assert [s.push(p) for p in [b"ab E", b"N", b"D and more", b"again"]] == ["ab ", "", "", ""]
    assert s.stopped and s.released_bytes == 3
    s = TextStream(("bc", "abcd"))  # the first occurrence wins, whichever stop it is
    assert s.push(b"xabc") == "xa" and s.stopped


def test_a_character_is_released_once_all_its_bytes_are_in() -> None:
    s = TextStream()
    e_acute = "é".encode()
    assert [s.push(e_acute[:1]), s.push(e_acute[1:] + b"!")] == ["", "é!"]
    assert s.push(b"\xe6\x97", final=True) == "\ufffd\ufffd"  # an answer cut inside a character


def test_content_entries_rebuild_the_content_and_end_of_turn_is_not_listed() -> None:
    table = {1: b"caf", 2: b"\xc3", 3: b"\xa9", 4: b" \xe6\x97", 5: b"\xa5!", EOS: b""}
    b = ContentBuilder(table.__getitem__, [EOS])
    deltas = [b.push(t, -0.5) for t in [1, 2, 3, 4, 5, EOS, 1]]
    assert [d.text for d in deltas] == ["caf", "", "é", " ", "日!", "", ""]
    assert [len(d.entries) for d in deltas] == [1, 0, 2, 0, 2, 0, 0]  # a split character's tokens come with it
    assert b.text == "café 日!" and b.ended
    assert b"".join(e.bytes for e in b.entries) == b.text.encode()
    assert [e.token for e in b.entries][1:3] == ["\ufffd", "\ufffd"] and EOS not in [e.token_id for e in b.entries]


def test_a_stop_string_cuts_the_token_holding_it() -> None:
    table = {1: b"one ", 2: b"tw", 3: b"o; three", 4: b" four"}
    b = ContentBuilder(table.__getitem__, [EOS], ("; ",))
    texts = [b.push(t, -1.0).text for t in [1, 2, 3, 4]]
    assert "".join(texts) == "one two" == b.text and b.ended
    assert [e.bytes for e in b.entries] == [b"one ", b"tw", b"o"]  # token 3 listed with its bytes before the stop


def test_byte_level_token_bytes_are_the_raw_bytes() -> None:
    tok = train_tokenizer(["walk left", "walk right"] * 20, vocab_size=300)  # never saw é or 日
    of = token_bytes_of(tok)
    text = "walk é 日本"
    ids = tok.encode(text, add_special_tokens=False)
    assert b"".join(of(i) for i in ids) == text.encode()
    assert any(of(i) == b"\xc3" for i in ids)  # é's first byte alone, not U+FFFD's bytes
    assert of(tok.eos_token_id) == b""


def test_sentencepiece_byte_fallback_token_bytes() -> None:
    vocab = {"<unk>": 0, "</s>": 1, "▁walk": 2, "▁": 3, **{f"<0x{b:02X}>": 4 + b for b in range(256)}}
    model = models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True)
    raw = Tokenizer(model)
    raw.pre_tokenizer = pre_tokenizers.Metaspace()
    raw.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="</s>", unk_token="<unk>")
    of = token_bytes_of(tok)
    ids = tok.encode("walk é", add_special_tokens=False)
    assert b"".join(of(i) for i in ids) == " walk é".encode()  # the leading ▁ is a space in the bytes
    assert of(4 + 0xC3) == b"\xc3" and of(1) == b""
