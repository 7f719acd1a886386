"""The s3:// source: credentials and AWS access (`aws`), SigV4 signing, listing pages, ranged GETs, and the
source itself (`source`).
"""
