"""The Hugging Face Hub source's own settings, declared beside it, one of its plug-in's option groups."""

from __future__ import annotations

from dataclasses import dataclass

from initializers.config.settings import setting_field


@dataclass(frozen=True)
class HubOptions:
    access_token: str | None = setting_field(
        "ACCESS_TOKEN",
        "HuggingFace Hub token (falls back to HF_TOKEN).",
        secret=True,
        fallback_env=("HF_TOKEN",),
        habits=("HF_HUB_TOKEN",),  # read by neither huggingface_hub (HF_TOKEN, HUGGING_FACE_HUB_TOKEN) nor us
    )
    revision: str | None = setting_field("REVISION", "HuggingFace branch, tag or commit; @REVISION in the URI wins.")
