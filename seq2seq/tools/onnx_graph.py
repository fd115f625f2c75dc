"""Just enough ONNX protobuf to write one graph (the Argos package's sentence splitter,
:mod:`seq2seq.tools.minisbd`) without the ``onnx`` package: the wire format's fields, tensors,
value infos and attributes, and :class:`Graph`, which names nodes and constants in order."""

from __future__ import annotations

import struct
from collections.abc import Sequence

_FLOAT, _INT64, _BOOL = 1, 7, 9  # TensorProto.DataType
_OPSET = 13


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 fields: two's complement
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes_field(number: int, value: bytes | str) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _tensor(name: str, values: list, kind: str) -> bytes:
    """A TensorProto of a list (1-D) or a list of equal rows (2-D)."""
    rows = values if values and isinstance(values[0], list) else None
    flat = [v for row in rows for v in row] if rows else values
    dims = [len(rows), len(rows[0])] if rows else [len(values)]
    code, packed = (_FLOAT, "<%df") if kind == "float" else (_INT64, "<%dq")
    raw = struct.pack(packed % len(flat), *flat)
    return b"".join(
        [*(_int_field(1, d) for d in dims), _int_field(2, code), _bytes_field(8, name)]
        + [_bytes_field(9, raw)]
    )


def _value_info(name: str, kind: int, dims: Sequence[int | str]) -> bytes:
    shape = b"".join(
        _bytes_field(1, _int_field(1, d) if isinstance(d, int) else _bytes_field(2, d))
        for d in dims
    )
    tensor_type = _int_field(1, kind) + _bytes_field(2, shape)
    return _bytes_field(1, name) + _bytes_field(2, _bytes_field(1, tensor_type))


def _attribute(name: str, value: int | list[int]) -> bytes:
    if isinstance(value, list):  # INTS
        return _bytes_field(1, name) + b"".join(_int_field(8, v) for v in value) + _int_field(20, 7)
    return _bytes_field(1, name) + _int_field(3, value) + _int_field(20, 2)  # INT


class Graph:
    """Nodes and constants of one ONNX graph, named in order; inputs ``units`` (B, T) int64
    and ``features`` (B, T, F) float, output ``scores``."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.constants: list[bytes] = []
        self.count = 0

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, values: list, kind: str) -> str:
        name = self._name("c")
        self.constants.append(_tensor(name, values, kind))
        return name

    def ints(self, *lists: list[int]) -> list[str]:
        return [self.const(values, "int64") for values in lists]

    def node(self, op: str, *inputs: str, output: str | None = None, **attributes) -> str:
        output = output or self._name("n")
        parts = [_bytes_field(1, name) for name in inputs]
        parts += [_bytes_field(2, output), _bytes_field(3, output), _bytes_field(4, op)]
        parts += [_bytes_field(5, _attribute(k, v)) for k, v in attributes.items()]
        self.nodes.append(b"".join(parts))
        return output

    def as_float(self, tensor: str) -> str:
        return self.node("Cast", tensor, to=_FLOAT)

    def shift(self, tensor: str, by: int, rank: int) -> str:
        """``tensor`` (B, T, ...) of ``rank`` moved ``by`` places along T: out[t] = in[t - by],
        with zeros (``<PAD>``, no flag, no letter) where that is outside."""
        if by == 0:
            return tensor
        before, after = [0] * rank, [0] * rank
        (before if by > 0 else after)[1] = abs(by)
        padded = self.node("Pad", tensor, self.const(before + after, "int64"))
        start, end = (0, -by) if by > 0 else (-by, 2**62)
        return self.node("Slice", padded, *self.ints([start], [end], [1]))

    def model(self, metadata: dict[str, str]) -> bytes:
        graph = b"".join(
            [*(_bytes_field(1, n) for n in self.nodes), _bytes_field(2, "minisbd_rules")]
            + [_bytes_field(5, c) for c in self.constants]
            + [_bytes_field(11, _value_info("units", _INT64, ["batch", "chars"]))]
            + [_bytes_field(11, _value_info("features", _FLOAT, ["batch", "chars", "feats"]))]
            + [_bytes_field(12, _value_info("scores", _FLOAT, ["batch", "chars", 5]))]
        )
        opset = _bytes_field(1, "") + _int_field(2, _OPSET)
        props = b"".join(
            _bytes_field(14, _bytes_field(1, k) + _bytes_field(2, v)) for k, v in metadata.items()
        )
        return b"".join(
            [_int_field(1, 8), _bytes_field(2, "seq2seq"), _bytes_field(7, graph)]
            + [_bytes_field(8, opset), props]
        )
