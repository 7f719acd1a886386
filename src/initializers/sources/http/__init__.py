"""The HTTP client the S3 and Hub sources share: HTTP/1.1 connections with proxies and TLS (`http1`), and ranged
GETs into a sink, retried and timed (`getter`).
"""
