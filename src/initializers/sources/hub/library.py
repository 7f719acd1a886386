"""huggingface_hub, imported with our defaults for what it reads from the environment when it is imported."""

from __future__ import annotations

import os
from types import ModuleType


def huggingface_hub() -> ModuleType:
    """The library (imported on first use: a run from another source never loads it). Users' own values win."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import huggingface_hub.constants
    import huggingface_hub.errors  # with the constants, what the package loads only when asked for them

    return huggingface_hub
