"""pyiceberg's private streaming helpers, which the cache source reads tables with (public in no release yet)."""

from __future__ import annotations

from initializers.adapters import require

#: The releases these calls were read against; pyproject.toml's `cache` extra pins the same range.
AT_LEAST, BELOW = "0.12", "0.13"
require("pyiceberg", AT_LEAST, BELOW)

from pyiceberg.io import pyarrow as _arrow_io  # noqa: E402 - only once the release is known to have them

#: Row positions of a range of a data file that no positional delete removes.
combine_positional_deletes = _arrow_io._combine_positional_deletes
#: Values of identity-partition columns that a data file does not store.
column_projection_values = _arrow_io._get_column_projection_values
#: Every positional delete file of a scan, read once, by data file.
read_all_delete_files = _arrow_io._read_all_delete_files
#: A batch as read from a file, cast and filled to the table's current schema.
to_requested_schema = _arrow_io._to_requested_schema
