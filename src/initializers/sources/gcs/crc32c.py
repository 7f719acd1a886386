"""Cloud Storage's CRC-32C, which every object has, computed by google-crc32c (native; imported once one is hashed)."""

from __future__ import annotations

from initializers.store.hashers import crc_kind

#: Its name, as the JSON API's field and the manifest record it.
CRC32C = "crc32c"


def _extend(value: int, data: bytes | memoryview) -> int:
    import google_crc32c

    return int(google_crc32c.extend(value, bytes(data)))  # it takes no view of a writable buffer: one copy, in memory


CRC32C_KIND = crc_kind(CRC32C, _extend, 0x82F63B78)
