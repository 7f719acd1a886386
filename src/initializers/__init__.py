"""Dataset and model initializers: fetch training inputs into a shared volume, completely or not at all."""

__version__ = "0.1.0"
