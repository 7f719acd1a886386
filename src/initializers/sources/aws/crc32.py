"""S3's CRC-32 (zlib's), one of the full-object checksums S3 stores: its kind."""

from __future__ import annotations

import zlib

from initializers.store.hashers import crc_kind

#: Its name, as S3's header says it (x-amz-checksum-crc32) and the manifest records it.
CRC32 = "crc32"
CRC32_KIND = crc_kind(CRC32, lambda value, data: zlib.crc32(data, value), 0xEDB88320)
