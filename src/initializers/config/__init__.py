"""The environment contract: the schema toolkit (`settings`), the one schema both programs read and the SDK
builder writes (`contract`), storage URIs and glob patterns.

May import `common` only; the sources' option groups come to it as data, in the plug-ins a `Kind` carries (`registry`).
"""
