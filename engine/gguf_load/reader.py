"""A GGUF file's metadata and tensor table, read from a memory map in well under a second.

`gguf.GGUFReader` builds a numpy view for every value of every metadata array; on a
Qwen2.5 file (151,936 tokens and as many merges) that takes 6-15 s, and transformers'
GGUF config and tokenizer loading read the file that way two more times. This reader walks the
same layout (the GGUF spec, with `gguf`'s enums and block sizes) with `struct` over one `mmap`,
keeps the string arrays a tokenizer needs, and hands out tensors as numpy views of the map: no
tensor byte is read until something uses it.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_DEFAULT_ALIGNMENT = 32  # llama.cpp's, when `general.alignment` is absent
# GGUFValueType -> struct format of the fixed-size scalars
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# Arrays of strings kept as lists; any other string array is read as its length (a vocabulary's
# scores and types are numeric arrays and always kept).
KEPT_STRING_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges")


class GGUFFormatError(ValueError):
    """The file is not a GGUF file this reader understands."""


@dataclass(frozen=True)
class TensorSlot:
    """One tensor's place in the file."""

    name: str
    qtype: int  # a gguf.GGMLQuantizationType value
    shape: tuple[int, ...]  # torch order: [rows, columns] for a matrix
    offset: int  # from the start of the file
    nbytes: int

    @property
    def type_name(self) -> str:
        import gguf

        return gguf.GGMLQuantizationType(self.qtype).name


class GGUFFile:
    """`metadata` (key -> value; string arrays outside `KEPT_STRING_ARRAYS` as their length) and
    `tensors` (name -> `TensorSlot`) of the GGUF at `path`. The map is copy-on-write: tensors
    handed out are writable numpy views that share the page cache until written (nothing writes
    them), so torch takes them without a copy or a read-only warning."""

    def __init__(self, path: str | Path) -> None:
        import gguf

        self.path = Path(path)
        with open(self.path, "rb") as handle:
            try:
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
            except ValueError as exc:  # an empty file
                raise GGUFFormatError(f"{self.path} is not a GGUF file: {exc}") from exc
        self.size = len(self._map)
        if self._map[:4] != _MAGIC:
            raise GGUFFormatError(f"{self.path} is not a GGUF file (it does not start with the GGUF magic)")
        version, tensor_count, kv_count = struct.unpack_from("<IQQ", self._map, 4)
        if version not in _VERSIONS:
            raise GGUFFormatError(f"{self.path} is GGUF version {version}; versions 2 and 3 are read")
        self._pos = 24
        self.metadata: dict[str, object] = {}
        for _ in range(kv_count):
            key = self._string()
            (value_type,) = self._unpack("<I")
            self.metadata[key] = self._value(value_type, keep_strings=key in KEPT_STRING_ARRAYS)
        entries = []
        for _ in range(tensor_count):
            name = self._string()
            (dims,) = self._unpack("<I")
            shape = tuple(reversed(self._unpack(f"<{dims}Q")))  # ggml lists the fastest dimension first
            qtype, offset = self._unpack("<IQ")
            entries.append((name, int(qtype), tuple(int(d) for d in shape), int(offset)))
        alignment = int(self.metadata.get("general.alignment", _DEFAULT_ALIGNMENT))
        data_start = -(-self._pos // alignment) * alignment
        self.tensors: dict[str, TensorSlot] = {}
        for name, qtype, shape, offset in entries:
            try:
                block, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(qtype)]
            except (ValueError, KeyError) as exc:
                raise GGUFFormatError(f"{self.path}: tensor {name} has ggml type {qtype}, which the gguf "
                                      "package does not know") from exc
            elements = int(np.prod(shape)) if shape else 1
            if elements % block:
                raise GGUFFormatError(f"{self.path}: tensor {name} of {elements} values is not whole blocks of {block}")
            slot = TensorSlot(name, qtype, shape, data_start + offset, elements // block * block_bytes)
            if slot.offset + slot.nbytes > self.size:
                raise GGUFFormatError(f"{self.path} is truncated: tensor {name} ends past the end of the file")
            self.tensors[name] = slot

    @property
    def architecture(self) -> str:
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise GGUFFormatError(f"{self.path} has no general.architecture in its metadata")
        return arch

    def raw(self, name: str) -> np.ndarray:
        """The tensor as stored: uint8 `[rows, bytes per row]` (a 1-D tensor is one row); a view."""
        slot = self.tensors[name]
        flat = np.frombuffer(self._map, dtype=np.uint8, count=slot.nbytes, offset=slot.offset)
        rows = int(np.prod(slot.shape[:-1])) if len(slot.shape) > 1 else 1
        return flat.reshape(rows, slot.nbytes // rows)

    def dequantized(self, name: str) -> np.ndarray:
        """The tensor as float32 values in its torch shape (a new array): the `gguf` package's
        dequantization, by way of `engine.quant`'s reference for the types that package lacks."""
        import gguf

        from hitrate.engine.quant import formats

        slot = self.tensors[name]
        raw, qtype = self.raw(name), gguf.GGMLQuantizationType(slot.qtype)
        if qtype == gguf.GGMLQuantizationType.F32:
            values = raw.view(np.float32).copy()
        elif qtype in formats.supported_types():
            values = formats.dequantize_reference(qtype, raw)
        else:
            values = gguf.quants.dequantize(raw, qtype).astype(np.float32, copy=False)
        return values.reshape(slot.shape)

    # ------------------------------------------------------------------ parsing

    def _unpack(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self._map, self._pos)
        self._pos += struct.calcsize(fmt)
        return values

    def _string(self) -> str:
        (length,) = self._unpack("<Q")
        start = self._pos
        self._pos += length
        return self._map[start:self._pos].decode("utf-8", errors="replace")

    def _value(self, value_type: int, keep_strings: bool = False):
        if value_type in _SCALARS:
            return self._unpack(_SCALARS[value_type])[0]
        if value_type == _STRING:
            return self._string()
        if value_type != _ARRAY:
            raise GGUFFormatError(f"{self.path}: metadata value of unknown type {value_type}")
        element_type, count = self._unpack("<IQ")
        if element_type in _SCALARS:
            fmt = _SCALARS[element_type]
            values = struct.unpack_from(f"<{count}{fmt[1]}", self._map, self._pos)
            self._pos += count * struct.calcsize(fmt)
            return list(values)
        if element_type == _STRING:
            if keep_strings:
                return [self._string() for _ in range(count)]
            for _ in range(count):
                (length,) = struct.unpack_from("<Q", self._map, self._pos)
                self._pos += 8 + length
            return count
        return [self._value(element_type) for _ in range(count)]
