"""Kafka record batch v2 (magic 2): encode, decode, CRC-32C and compression. No I/O, no clock."""

from kafkajet.protocol.varint import TABLE_SIZE
from kafkajet.records.batch import (
    BATCH_HEADER_SIZE,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    RecordBatch,
    build_batch,
    build_control_batch,
    control_record_type,
    decode_batches,
    encode_batch,
    encode_control_record,
    seal_in_place,
)
from kafkajet.records.codecs import Compression, compress, decompress
from kafkajet.records.columns import MAX_COLUMN_LEN, append_columns
from kafkajet.records.record import (
    Record,
    append_record,
    append_run,
    decode_records,
    encode_headers,
    encode_record,
    record_size_upper_bound,
)

__all__ = [
    "BATCH_HEADER_SIZE", "CONTROL_ABORT", "CONTROL_COMMIT", "MAX_COLUMN_LEN", "TABLE_SIZE", "Compression", "Record",
    "RecordBatch", "append_columns", "append_record", "append_run", "build_batch", "build_control_batch", "compress", "control_record_type", "decode_batches",
    "decode_records", "encode_headers", "decompress", "encode_batch", "encode_control_record", "encode_record",
    "record_size_upper_bound", "seal_in_place",
]
