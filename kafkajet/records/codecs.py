"""Compression codecs with the framing Kafka's Java client writes, so any broker and consumer can read us.

* gzip: a standard gzip stream (multi-member streams are accepted on read, as java.util.zip does).
* snappy: snappy-java's "xerial" stream framing, which is what the Java client writes; raw snappy (librdkafka
  and some older clients) is accepted on read.
* lz4: the LZ4 frame format with the exact header the Java client writes (independent 64 KiB blocks, no
  block or content checksum, correct header checksum). The Java reader rejects linked blocks, which is
  cramjam's default, so frames are assembled here from raw blocks.
* zstd: a standard zstd frame.

Levels are Java's (KIP-390): gzip 1-9 (default 6, zlib's), lz4 1-17 (default 9), zstd -131072..22 (default 3).
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

# Java's default; at this level it uses lz4's fast compressor, at any other its high-compression one (KIP-390).
LZ4_DEFAULT_LEVEL = 9
GZIP_DEFAULT_LEVEL = 6  # zlib's, which Java's Deflater.DEFAULT_COMPRESSION (-1) means
ZSTD_DEFAULT_LEVEL = 3

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


def _lz4_compress_hc(data: Buffer, level: int) -> bytes:
    """lz4 at a high-compression level. cramjam offers one only through its frame compressor, whose frames
    carry block checksums (FLG 0x70); its blocks are re-framed under the header Java writes, so every reader
    sees the same frame whatever the level."""
    c = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    c.compress(data if isinstance(data, bytes) else bytes(data))  # it takes nothing else; a batch is a view
    frame = memoryview(bytes(c.finish()))
    flg = frame[4]
    # Version 01, independent 64 KiB blocks, no content size or dictionary: only the checksums may differ.
    if frame[:4] != LZ4_FRAME_HEADER[:4] or flg & 0xEB != 0x60 or frame[5] != LZ4_FRAME_HEADER[5]:
        raise RuntimeError(f"unexpected lz4 frame header from cramjam: {bytes(frame[:7]).hex()}")
    checksum = 4 if flg & 0x10 else 0
    parts: list[Buffer] = [LZ4_FRAME_HEADER]
    pos = 7
    while True:
        word = int.from_bytes(frame[pos:pos + 4], "little")
        if word == 0:
            break
        end = pos + 4 + (word & ~_LZ4_UNCOMPRESSED)
        parts.append(frame[pos:end])
        pos = end + checksum
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


# --- dispatch --------------------------------------------------------------------------------------

_CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a records region with the given codec.

    level applies to gzip, lz4 and zstd (None: Java's defaults; gzip's -1 is Java's spelling of its default);
    snappy has no levels.
    """
    if codec == 0:
        return bytes(data)
    if codec == 1:
        return bytes(cramjam.gzip.compress(data, level=GZIP_DEFAULT_LEVEL if level in (None, -1) else level))
    if codec == 2:
        return _snappy_compress(data)
    if codec == 3:
        return _lz4_compress(data) if level in (None, LZ4_DEFAULT_LEVEL) else _lz4_compress_hc(data, level)
    if codec == 4:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_DEFAULT_LEVEL if level is None else level))
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
