"""The publisher's signature (SIGNATURE): its settings checked before anything is fetched, and what landed checked
against it before the manifest is written."""

from __future__ import annotations

from initializers.common.errors import ConfigError, FetchError
from initializers.config.contract import Config, Kind
from initializers.config.signing import SigningOptions
from initializers.destination.state import StateDir
from initializers.plan import signature
from initializers.plan.index import PlanIndex
from initializers.plan.selection import Selected
from initializers.steps.context import RunContext
from initializers.steps.opening import plugin_of
from initializers.steps.outcome import finished


def signing_for(config: Config, kind: Kind) -> SigningOptions | None:
    """The signature check this run makes; None when SIGNATURE is off. A source that does not read the options (one
    that makes its files) refuses them rather than skip a check asked for."""
    plugin = plugin_of(config, kind)
    signing = config.options(SigningOptions)
    if not signing.enabled:
        return None
    if SigningOptions not in plugin.options:
        raise ConfigError(f"SIGNATURE does not apply to {plugin.scheme}:// sources: they publish no model signature")
    signing.trust()
    signing.relative_path()
    return signing


def check_landed(
    signing: SigningOptions, state: StateDir, index: PlanIndex, selected: Selected, context: RunContext
) -> signature.Verdict:
    """The verdict on what landed, before the manifest is written; under enforce, a failure takes the download back
    (`StateDir.discard`: no manifest, no file at a final path) and ends the run with the reason. A stop is still
    taken while files are hashed again: the run then ends as stopped, without a manifest, as before the last step."""
    context.waiting.step = "the publisher's signature to be checked"
    planned = [(file, finished(file, done)) for file, done in index.planned()]
    landed = ((file.path, done.verified_against(file)) for file, done in planned)
    verdict = signature.check(signing, state.root, landed, selected.left_out, context.stop.check)
    if verdict.verified:
        context.log.info("signature verified", signer=verdict.signer, not_fetched=len(verdict.not_fetched))
        if verdict.not_fetched:
            context.log.info("signed files not fetched", files=len(verdict.not_fetched), first=verdict.not_fetched[:5])
        return verdict
    if verdict.fails_the_run:
        state.discard(file.path for file, _ in planned)
        raise FetchError(f"SIGNATURE=enforce: {verdict.reason}; nothing was kept")
    context.log.warning("signature did not verify", reason=verdict.reason, signer=verdict.signer)
    return verdict
