"""Parsing `STORAGE_URI`: which scheme (its store parses where in that scheme). Pure functions, no I/O."""

from __future__ import annotations

from initializers.common.errors import ConfigError
from initializers.common.uri_credentials import credential_names, masked
from initializers.config.contract import Kind
from initializers.config.registry import SourcePlugin


def scheme_of(uri: str, kind: Kind) -> str:
    """The scheme of the source that takes the URI: an accepted source's that claims it (the Hub's pages), else its own
    if this program accepts it (claims first: `registry` states the rule); otherwise a ConfigError naming the accepted
    schemes, and what a source takes of the URI's scheme when one claims some (`https://`: a Hub page's address)."""
    accepted = ", ".join(f"{s}://" for s in kind.schemes)
    if (names := credential_names(uri)) and not _takes_signed_urls(uri, kind):
        raise ConfigError(
            f"STORAGE_URI: {masked(uri)!r} carries credentials in its query ({', '.join(names)}): the {kind.program} "
            "reads them from its variables alone (a SAS token from AZURE_STORAGE_SAS_TOKEN, Google's from "
            "GOOGLE_APPLICATION_CREDENTIALS), where they stay out of logs, messages and the manifest"
        )
    taker = _store_of(uri, kind)
    if taker is not None:
        return taker.scheme
    scheme, sep, _ = uri.lower().partition("://")
    if not sep or not scheme:
        raise ConfigError(f"STORAGE_URI: {masked(uri)!r} is not a URI; the {kind.program} accepts {accepted}")
    takes = [plugin.claim.usage for plugin in kind.plugins if plugin.claim and scheme in plugin.claim.schemes]
    if takes:
        raise ConfigError(
            f"STORAGE_URI: {masked(uri)!r}: the only {scheme}:// URI the {kind.program} accepts is "
            f"{' or '.join(takes)}; otherwise it accepts {accepted}"
        )
    raise ConfigError(f"STORAGE_URI: scheme {scheme}:// is not supported by the {kind.program}; it accepts {accepted}")


def _store_of(uri: str, kind: Kind) -> SourcePlugin | None:
    """The accepted store that takes `uri` by the registry's rule: the first that claims it, else its scheme's (or the
    one that takes that scheme as its own: `also_schemes`); None: none does."""
    claimant = next((plugin for plugin in kind.plugins if plugin.claims(uri)), None)
    scheme, sep, _ = uri.lower().partition("://")
    if claimant is not None or not sep:
        return claimant
    return next((plugin for plugin in kind.plugins if scheme in (plugin.scheme, *plugin.also_schemes)), None)


def _takes_signed_urls(uri: str, kind: Kind) -> bool:
    """Whether the store that takes `uri` takes signed URLs (`signed_urls`): a presigned URL's query is its own."""
    taker = _store_of(uri, kind)
    return taker is not None and taker.signed_urls


def folder_prefix(key: str) -> str:
    """The key prefix of the folder a bucket URI's key names: `data` means `data/`, never `data-old/`."""
    return key if not key or key.endswith("/") else key + "/"
