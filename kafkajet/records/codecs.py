"""Compression codecs with the framing Kafka's Java client writes, so any broker and consumer can read us.

* gzip: a standard gzip stream (multi-member streams are accepted on read, as java.util.zip does).
* snappy: snappy-java's "xerial" stream framing, which is what the Java client writes; raw snappy (librdkafka
  and some older clients) is accepted on read.
* lz4: the LZ4 frame format with the exact header the Java client writes (independent 64 KiB blocks, no
  block or content checksum, correct header checksum). The Java reader rejects linked blocks, which is
  cramjam's default, so frames are assembled here from raw blocks.
* zstd: a standard zstd frame at level 3, Kafka's default.
"""

from __future__ import annotations

from enum import IntEnum

import cramjam

from kafkajet.errors import CorruptRecordError


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        """Map a compression.type config value (Java names: none, gzip, snappy, lz4, zstd) to the codec."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression type {name!r}; expected one of none, gzip, snappy, lz4, zstd"
            ) from None


Buffer = bytes | bytearray | memoryview

# --- snappy (xerial framing) -----------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
# magic, then version 1 and minimum compatible version 1 as big-endian int32s.
XERIAL_HEADER = XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
# snappy-java's default block size; Java readers accept any, but matching it keeps our output identical.
XERIAL_BLOCK_SIZE = 32 * 1024


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(len(block).to_bytes(4, "big"))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_decompress(block: Buffer) -> bytes:
    # cramjam allocates whatever the stream's length preamble claims before looking at the data (a bogus
    # 5-byte preamble aborts the process), so bound it first: no snappy element expands more than
    # 64 output bytes per 3 input bytes.
    try:
        claimed = cramjam.snappy.decompress_raw_len(block)
        if claimed > 22 * len(block) + 64:
            raise CorruptRecordError(
                f"snappy decompression failed: block of {len(block)} bytes claims {claimed} uncompressed bytes"
            )
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"snappy decompression failed: {e}") from None


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    if view[:8] != XERIAL_MAGIC:
        return _snappy_raw_decompress(view)
    if len(view) < 16:
        raise CorruptRecordError(f"snappy decompression failed: xerial header truncated at {len(view)} bytes")
    out = []
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"snappy decompression failed: xerial block length truncated at byte {pos}")
        size = int.from_bytes(view[pos:pos + 4], "big")
        pos += 4
        if size > end - pos:
            raise CorruptRecordError(
                f"snappy decompression failed: xerial block of {size} bytes but only {end - pos} remain"
            )
        out.append(_snappy_raw_decompress(view[pos:pos + size]))
        pos += size
    return b"".join(out)


# --- lz4 (frame format, Kafka's flavour) -----------------------------------------------------------

# Magic 0x184D2204 (LE); FLG 0x60 = version 01, independent blocks, no checksums, no content size;
# BD 0x40 = 64 KiB max block; 0x82 = second byte of xxh32(FLG, BD), the header checksum.
LZ4_FRAME_HEADER = b"\x04\x22\x4d\x18\x60\x40\x82"
LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000
_LZ4_END_MARK = b"\x00\x00\x00\x00"


def _lz4_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [LZ4_FRAME_HEADER]
    compress_block = cramjam.lz4.compress_block
    for start in range(0, len(view), LZ4_BLOCK_SIZE):
        chunk = view[start:start + LZ4_BLOCK_SIZE]
        block = bytes(compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            # Incompressible: the frame format stores it verbatim with the high bit of the size set.
            parts.append((len(chunk) | _LZ4_UNCOMPRESSED).to_bytes(4, "little"))
            parts.append(bytes(chunk))
        else:
            parts.append(len(block).to_bytes(4, "little"))
            parts.append(block)
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


# --- dispatch --------------------------------------------------------------------------------------

_CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a records region with the given codec.

    level applies to gzip and zstd (None: Kafka's defaults, 6 and 3). snappy has no levels, and cramjam's lz4
    block compressor has one speed (the equivalent of the Java client's default fast compressor).
    """
    if codec == 0:
        return bytes(data)
    if codec == 1:
        return bytes(cramjam.gzip.compress(data, level=6 if level is None else level))
    if codec == 2:
        return _snappy_compress(data)
    if codec == 3:
        return _lz4_compress(data)
    if codec == 4:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer) -> bytes:
    """Inverse of compress; any malformed input raises CorruptRecordError naming the codec."""
    if codec == 0:
        return bytes(data)
    name = _CODEC_NAMES.get(codec)
    if name is None:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    if codec == 2:
        return _snappy_decompress(data)
    try:
        if codec == 1:
            return bytes(cramjam.gzip.decompress(data))
        if codec == 3:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"{name} decompression failed: {e}") from None
