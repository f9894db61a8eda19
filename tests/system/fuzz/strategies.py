"""Hypothesis strategies for protobuf messages of any type, built from their descriptors.

A generated message has every kind of value a field can hold — empty, huge and non-ASCII
strings, integer extremes, NaN and infinities, long repeated fields, nested messages, unknown
enum numbers — and `payloads` adds what a protobuf parser must refuse or survive: random bytes,
truncated serializations, and a valid message of another type.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

__all__ = ["messages", "payloads"]

_INT_LIMITS = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1), FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1), FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1), FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}

_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "gym_text", "r0/job-0", "../../etc/passwd", "\x00", "é" * 50, "{}", "null"]),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "\u0394", "#"]), st.integers(1_000, 200_000)),
)


def _integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    edges = [v for v in (lo, hi, 0, 1, -1, 2**31 - 1, 2**31, 10**9) if lo <= v <= hi]
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi), st.integers(max(lo, -5), min(hi, 100)))


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = field.type
    if t in _INT_LIMITS:
        return _integers(*_INT_LIMITS[t])
    if t in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        width = 32 if t == FieldDescriptor.TYPE_FLOAT else 64
        return st.one_of(st.floats(width=width), st.sampled_from([0.0, 1.0, -1.0, 1e30, float("nan"), float("inf")]))
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == FieldDescriptor.TYPE_STRING:
        return _text
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if t == FieldDescriptor.TYPE_ENUM:
        return st.one_of(st.sampled_from([v.number for v in field.enum_type.values]), st.integers(-3, 99))
    raise TypeError(f"no strategy for field type {t} of {field.full_name}")


def messages(descriptor: Descriptor, depth: int = 3) -> st.SearchStrategy[Message]:
    """Messages of ``descriptor``'s type: each field set or left unset, at most ``depth`` levels deep."""
    cls = GetMessageClass(descriptor)
    fields = list(descriptor.fields)

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        msg = cls()
        for field in fields:
            if not draw(st.booleans()):
                continue
            is_message = field.type == FieldDescriptor.TYPE_MESSAGE
            if is_message and field.message_type.GetOptions().map_entry:
                key_f, value_f = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
                if value_f.type == FieldDescriptor.TYPE_MESSAGE:
                    continue  # maps of messages: none in our protos' requests
                entries = draw(st.dictionaries(_scalar(key_f), _scalar(value_f), max_size=5))
                getattr(msg, field.name).update(entries)
            elif is_message:
                if depth <= 0:
                    continue
                sub = messages(field.message_type, depth - 1)
                if field.is_repeated:
                    getattr(msg, field.name).extend(draw(st.lists(sub, max_size=4)))
                else:
                    getattr(msg, field.name).CopyFrom(draw(sub))
            elif field.is_repeated:
                count = draw(st.one_of(st.integers(0, 6), st.just(5_000)))
                if count > 6:  # a long list of one short value (5,000 huge strings would be gigabytes)
                    short = st.text(max_size=8) if field.type == FieldDescriptor.TYPE_STRING else _scalar(field)
                    getattr(msg, field.name).extend([draw(short)] * count)
                else:
                    getattr(msg, field.name).extend(draw(st.lists(_scalar(field), min_size=count, max_size=count)))
            else:
                setattr(msg, field.name, draw(_scalar(field)))
        return msg

    return build()


def payloads(descriptor: Descriptor, others: list[Descriptor]) -> st.SearchStrategy[bytes]:
    """Wire bytes for a ``descriptor`` endpoint: mostly generated messages, also random bytes,
    truncated messages and messages of the ``others`` types."""
    serialized = messages(descriptor).map(lambda m: m.SerializeToString())
    truncated = st.tuples(serialized, st.floats(0.0, 1.0)).map(lambda t: t[0][: int(len(t[0]) * t[1])])
    strategies = [serialized, serialized, serialized, st.binary(max_size=256), truncated]
    if others:
        strategies.append(st.sampled_from(others).flatmap(lambda d: messages(d, 2)).map(lambda m: m.SerializeToString()))
    return st.one_of(*strategies)
