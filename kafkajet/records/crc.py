"""CRC-32C (Castagnoli), the checksum of record batch v2, from the crc32c package's C extension.

The package's __init__ also imports importlib.metadata (for its __version__) and its command line (argparse):
about 7 MB of RSS in every producer process, for one function. So the extension module is loaded on its
own; if the package's layout ever differs from what is expected, the ordinary import is used instead.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable
from typing import Any


def _load() -> Callable[..., int]:
    try:
        spec = importlib.util.find_spec("crc32c")  # locates the package without running its __init__
        for location in (spec.submodule_search_locations or ()) if spec is not None else ():
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(location, "_crc32c" + suffix)
                if os.path.isfile(path):
                    loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path)
                    ext_spec = importlib.util.spec_from_file_location("crc32c._crc32c", path, loader=loader)
                    assert ext_spec is not None
                    module: Any = importlib.util.module_from_spec(ext_spec)
                    loader.exec_module(module)
                    function: Callable[..., int] = module.crc32c
                    return function
    except Exception:  # noqa: BLE001 - any surprise: the documented import below
        pass
    from crc32c import crc32c

    return crc32c


crc32c = _load()
