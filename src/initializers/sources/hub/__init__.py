"""The hf:// source: the Hub's listing through huggingface_hub, the resolve GETs (`get`), the token's guard
(`guard`), and the source itself (`source`).
"""
