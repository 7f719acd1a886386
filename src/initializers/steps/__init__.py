"""The steps of one run, each a module, in the order `run` takes them: open the source (`opening`), settle with what
OUTPUT_PATH already holds (`held`), list and fetch (`fetching`), check the publisher's signature (`signing`), claim
completion with the manifest (`completing`), and say what was done (`outcome`).

The top floor: may import every package below it; only the root's `run` imports it.
"""
