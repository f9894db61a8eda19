"""Generated tokens to text, one token at a time (pure): each token's raw bytes, the text that is
safe to send so far (stop strings held back only while they may still match), and which tokens
that text is made of.

The OpenAI API's ``logprobs.content[].bytes`` are the UTF-8 bytes of a token; a byte-level token
may end inside a character (é is two tokens in a tokenizer that never saw it), so a token's bytes
are read from the vocabulary, never from decoding the token alone (that gives U+FFFD). The text
of an answer is the UTF-8 decoding of its tokens' concatenated bytes, so the bytes of the listed
tokens rebuild the text exactly (for a valid UTF-8 answer; invalid bytes become U+FFFD).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = ["token_bytes_of", "TextStream", "TokenEntry", "Delta", "ContentBuilder", "byte_level_alphabet"]

_HEX_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@lru_cache(maxsize=1)
def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet inverted: printable character → the byte it stands for
    (Radford et al. 2019, `bytes_to_unicode` of the GPT-2 release; the `tokenizers` ByteLevel
    pre-tokenizer uses the same table)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def _decoder_kind(tokenizer: Any) -> str:
    """``bytelevel``, ``sentencepiece`` (▁ for spaces, <0xNN> byte fallback) or ``other``."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return "sentencepiece" if "▁" in "".join(list(tokenizer.get_vocab())[:2000]) else "other"
    decoder = json.loads(backend.to_str()).get("decoder") or {}
    kinds = {decoder.get("type")} | {d.get("type") for d in decoder.get("decoders", [])}
    if "ByteLevel" in kinds:
        return "bytelevel"
    if kinds & {"ByteFallback", "Metaspace", "Replace"}:
        return "sentencepiece"
    return "other"


def token_bytes_of(tokenizer: Any) -> Callable[[int], bytes]:
    """A function: token id → the raw bytes that token adds to the text (cached per id).

    Byte-level BPE (GPT-2, Qwen, SmolLM2, Llama 3): the token's characters mapped back through the
    byte-level alphabet. SentencePiece (Llama 2, Mistral): ``<0xNN>`` byte-fallback tokens are that
    byte, ``▁`` is a space. Other tokenizers: the token decoded alone, UTF-8 encoded. Special
    tokens (end of turn, ...) add no bytes: they are not part of the text.
    """
    kind = _decoder_kind(tokenizer)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special |= {i for i, t in added.items() if getattr(t, "special", False)}
    alphabet = byte_level_alphabet()

    @lru_cache(maxsize=None)
    def of(token_id: int) -> bytes:
        if token_id in special:
            return b""
        if token_id in added:  # a non-special added token: its text as written
            return str(added[token_id].content).encode()
        piece = tokenizer.convert_ids_to_tokens(token_id)
        if piece is None:
            return b""
        if kind == "bytelevel" and all(ch in alphabet for ch in piece):
            return bytes(alphabet[ch] for ch in piece)
        if kind == "sentencepiece":
            m = _HEX_BYTE.fullmatch(piece)
            return bytes([int(m.group(1), 16)]) if m else piece.replace("▁", " ").encode()
        return tokenizer.decode([token_id]).encode()

    return of


@dataclass
class TextStream:
    """Bytes in, text out as soon as it is final: a character is released once all its bytes are in,
    and text that may still be the start of a stop string is held back until it cannot be.

    Once a stop string appears, the text before its first occurrence is released and the stream
    is ``stopped``: nothing after it is ever released. Character counts are of the surrogate-escaped
    text (one code point per undecodable byte) so ``released_bytes`` is exact; invalid bytes are
    released as U+FFFD.
    """

    stops: Sequence[str] = ()
    stopped: bool = False
    released_bytes: int = 0
    """Input bytes whose text was released."""
    _held: str = ""
    _decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="surrogateescape"))

    def push(self, data: bytes, final: bool = False) -> str:
        """Add ``data``; returns the newly released text ('' while held back or once stopped).
        ``final``: no more bytes follow (an incomplete character and any held text are released)."""
        if self.stopped:
            return ""
        text = self._held + self._decoder.decode(data, final)
        hits = [i for i in (text.find(s) for s in self.stops if s) if i >= 0]
        if hits:
            self.stopped = True
            out, self._held = text[: min(hits)], ""
        elif final:
            out, self._held = text, ""
        else:
            keep = self._may_start_stop(text)
            out, self._held = text[: len(text) - keep], text[len(text) - keep:]
        self.released_bytes += len(out.encode("utf-8", "surrogateescape"))
        return re.sub("[\udc80-\udcff]", "\ufffd", out)

    def _may_start_stop(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that is a proper prefix of a stop string."""
        best = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(text)), best, -1):
                if text.endswith(s[:k]):
                    best = k
                    break
        return best


@dataclass(frozen=True)
class TokenEntry:
    """One token of the content, as OpenAI's ``logprobs.content[]`` lists it."""

    token_id: int
    token: str
    """Its bytes decoded (U+FFFD where it ends inside a character)."""
    logprob: float
    bytes: bytes
    """Its raw bytes (a token cut by a stop string: the bytes before the stop)."""

    def as_openai(self) -> dict:
        """The ``logprobs.content[]`` entry (``top_logprobs`` is empty: not returned by the backends)."""
        return {"token": self.token, "logprob": self.logprob, "bytes": list(self.bytes), "top_logprobs": []}


@dataclass(frozen=True)
class Delta:
    """What one pushed token releases: text and the tokens it completes (both may be empty)."""

    text: str
    entries: tuple[TokenEntry, ...]


@dataclass
class ContentBuilder:
    """An answer's content built token by token: the streamed deltas and the non-streamed content
    come from the same pushes, so they are equal. End-of-turn (``eos_ids``) ends the content and is
    not in it; a stop string ends it before the stop (see `TextStream`).

    A token is listed (`TokenEntry`) once all of its bytes are released; at a stop string the token
    holding it is listed with its bytes before the stop, and tokens after it are not listed.
    """

    token_bytes: Callable[[int], bytes]
    eos_ids: Sequence[int] = ()
    stops: Sequence[str] = ()
    ended: bool = False
    text: str = ""
    entries: list[TokenEntry] = field(default_factory=list)
    _stream: TextStream = field(init=False)
    _pending: list[tuple[int, float, bytes]] = field(default_factory=list)
    _listed_bytes: int = 0

    def __post_init__(self) -> None:
        self._stream = TextStream(tuple(self.stops))

    def push(self, token_id: int, logprob: float) -> Delta:
        """Add the next generated token (``logprob`` in nats)."""
        if self.ended:
            return Delta("", ())
        if token_id in self.eos_ids:
            return self.finish()
        data = self.token_bytes(token_id)
        self._pending.append((token_id, logprob, data))
        return self._release(self._stream.push(data))

    def finish(self) -> Delta:
        """No more tokens: release what was held back (no stop string matched)."""
        if self.ended:
            return Delta("", ())
        delta = self._release(self._stream.push(b"", final=True))
        self.ended = True
        return delta

    def _release(self, text: str) -> Delta:
        self.text += text
        if self._stream.stopped:
            self.ended = True
        released = self._stream.released_bytes
        out: list[TokenEntry] = []
        while self._pending:
            token_id, logprob, data = self._pending[0]
            room = released - self._listed_bytes
            if len(data) > room:
                if not (self._stream.stopped and room > 0):
                    break
                data = data[:room]  # the token holding the stop string: its bytes before the stop
            self._pending.pop(0)
            self._listed_bytes += len(data)
            if data:  # a special token adds no text and is not listed
                out.append(TokenEntry(token_id, data.decode("utf-8", "replace"), logprob, data))
        if self._stream.stopped:
            self._pending.clear()
        self.entries.extend(out)
        return Delta(text, tuple(out))
