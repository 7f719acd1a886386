"""The cache:// source: an Iceberg table read with pyiceberg (`storage`: its FileIO over S3; `parts`: one data
file's rows into shard parts) and made into Parquet shards (`source`). pyiceberg and pyarrow are imported lazily.
"""
