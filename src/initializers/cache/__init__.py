"""The cache:// materialisation once written: shards cut from rows laid end to end (`sharding`), read back in table
order (`shards`) and served over Arrow Flight (`flight`); pyarrow's allocator choice (`arrow_memory`).

May import `common` and `destination`; pyarrow is imported lazily, so a model run never pays for it.
"""
