"""The HTTP client every HTTP store shares: HTTP/1.1 connections with proxies and TLS (`http1`, `tls`), GETs into a
sink, retried and timed (`getter`), the object-store template their reads go through (`objects`), and the check that
a listing's pages move on (`pages`).
"""
