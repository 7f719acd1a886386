"""Store plug-ins as data: what a store declares of itself (`SourcePlugin`) and the URIs of other schemes it takes as
its own (`Claim`). Each store's face makes its plug-in; the composition root (`initializers.sources.STORES`) lists them
in the programs' order and makes the programs of them (`contract.programs`), so the contract, the command line and the
SDK builder are handed the stores and never name one. Opening a store imports its modules only then, so a model download
never loads the cache source's pyarrow.

Which store takes a URI (`uris.scheme_of`): claims come first. A URI of a scheme some accepted store claims URIs of (or
of no scheme) goes to the first such store, in the programs' order, that takes it (the Hub: its pages,
`https://huggingface.co/...`; Azure: its blob addresses, `https://ACCOUNT.blob.core.windows.net/...`); any other URI
goes to the store of its scheme, or of which it is one of the `also_schemes` (the web's: http://). So the store of
scheme https:// takes only the https:// (and http://) URIs no claim takes, wherever it stands in the programs' order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Claim:
    """URIs of other schemes a source takes as its own (the Hub: the address of a Hub page, pasted from a browser)."""

    #: The schemes of the URIs it may take (the others of these schemes are refused naming what it takes).
    schemes: tuple[str, ...]
    #: What it takes, in words, for --help and messages.
    usage: str
    takes: Callable[[str], bool]


@dataclass(frozen=True)
class SourcePlugin:
    """One source, as the core knows it."""

    scheme: str
    #: The form of its URIs, for --help and messages: `s3://BUCKET[/PREFIX]`.
    usage: str
    #: The option groups (schemas declared beside the source) it reads, besides the shared settings.
    options: tuple[type, ...]
    #: Checks a URI it takes (of its scheme, or one it `claims`) for a program's kind and returns its parsed location,
    #: whose `place` (else the location itself, as a string) names what is fetched whatever its version (an object's
    #: ETag, a generation, a snapshot); raises ConfigError naming STORAGE_URI.
    locate: Callable[[str, Any], Any]
    #: Imports the source's modules and opens it: (uri, config holding the shared settings, OUTPUT_PATH among them
    #: (`Config.output_dir(kind)`), and only its own option groups, kind).
    open: Callable[..., Any]
    #: The programs that accept it, by their kind's name (`Kind.name`): both unless it says otherwise.
    kinds: tuple[str, ...] = ("dataset", "model")
    #: True when a run splits the plan over SHARD_COUNT initializers; False when the source shards by itself.
    splits_plan: bool = True
    #: Shared settings (field names) that mean nothing for this source, and why: refused when given.
    refuses: Mapping[str, str] = field(default_factory=dict)
    #: What a shared setting (field name) means for this source, a sentence added to its --help.
    notes: Mapping[str, str] = field(default_factory=dict)
    #: Variables it reads that have no option of ours (its libraries' own), for `--help`.
    also_reads: tuple[str, ...] = ()
    claim: Claim | None = None
    #: Other schemes whose URIs it takes as its own, after every claim (https:// takes http://).
    also_schemes: tuple[str, ...] = ()
    #: It takes URIs whose query carries credentials (a presigned URL's signature), hiding the query wherever it shows
    #: them; any other store's URI with such a query is refused, its credentials belonging in variables.
    signed_urls: bool = False
    #: Its SDK classes' name where Kubeflow's has none (`Gcs`: GcsDatasetInitializer) [default: the scheme capitalized].
    sdk_name: str = ""

    def claims(self, uri: str) -> bool:
        """Whether it takes `uri`, of a scheme it claims URIs of or of none, as its own."""
        if self.claim is None:
            return False
        scheme, sep, _ = uri.partition("://")
        return (not sep or scheme.lower() in self.claim.schemes) and self.claim.takes(uri)


def option_groups(plugins: Iterable[SourcePlugin]) -> tuple[type, ...]:
    """The option groups `plugins` read, in their order, each once (S3 access, which two sources read)."""
    return tuple(dict.fromkeys(group for plugin in plugins for group in plugin.options))
