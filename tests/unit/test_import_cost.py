"""What `import kafkajet` costs a process that never uses TLS: every producer pays it, in RSS and start-up."""

from __future__ import annotations

import subprocess
import sys


def test_a_plaintext_producer_loads_neither_openssl_nor_importlib_metadata() -> None:
    # ssl (OpenSSL, about 6 MB) is imported where TLS is configured; the crc32c package's __init__ (which pulls
    # importlib.metadata and argparse, about 7 MB) is bypassed for its extension module.
    # describe() imports every compiled module, as Producer() does to log which build runs.
    code = ("import sys, kafkajet.producer.producer, kafkajet.admin, kafkajet.fetch; "
            "from kafkajet._build import describe; describe(); "
            "print(sorted(m for m in ('ssl', 'importlib.metadata', 'crc32c') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_the_crc32c_function_is_the_castagnoli_checksum() -> None:
    import crc32c as package

    from kafkajet.records.crc import crc32c

    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    data = bytes(range(256)) * 67
    assert crc32c(data) == package.crc32c(data)
    assert crc32c(data[100:], crc32c(data[:100])) == crc32c(data)  # continues from a running value
