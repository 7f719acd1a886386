"""The AWS access the s3:// and cache:// sources share (the cache reads its table through S3): the settings (`options`),
credentials, role, region, CA bundle, decided once (`access`), SigV4 (`sigv4`), a bucket's signed GETs (`bucket`).
"""
