"""The HTTP client every HTTP store shares: HTTP/1.1 connections with proxies and TLS (`http1`, `tls`), GETs into a
sink, retried and timed (`getter`), the object-store template (`objects`), and that listing pages move on (`pages`).
"""
