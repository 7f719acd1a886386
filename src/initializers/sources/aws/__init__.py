"""The AWS access the s3:// and cache:// sources share (the cache reads its table through S3); a package both import,
not a plug-in: it declares no store. The settings (`options`), how a run reaches S3, decided once: credentials, roles,
region, CA bundle (`access`), SigV4 signing (`sigv4`), and the signed GETs of one bucket's objects and listing pages
(`bucket`).
"""
