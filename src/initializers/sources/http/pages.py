"""That a listing paged by a token moves on: a server cannot keep a listing going for ever."""

from __future__ import annotations

from initializers.store.contract import MAX_EMPTY_PAGES


class PageChain:
    """Every token new, no page repeated, not endlessly many empty pages in a row (not names in order: servers built on
    folders, SeaweedFS for one, list `k/0/x` before `k/0-y`, unlike S3); a ValueError says how the chain went wrong."""

    #: What the store calls the token that continues a listing, as messages name it.
    token_name = "continuation token"

    def __init__(self) -> None:
        self._tokens: set[str] = set()
        self._pages: set[int] = set()  # a hash of each page's entries
        self._empty = 0

    def follow_entries(self, entries: tuple[str, ...], token: str | None) -> None:
        """The next page, by its entries (names, folders) in order and the token that continues it (None: none)."""
        if entries:
            fingerprint = hash(entries)
            if fingerprint in self._pages:
                raise ValueError(
                    f"a page listed {entries[0]!r} .. {entries[-1]!r} again, as an earlier one did: the listing would "
                    "never end"
                )
            self._pages.add(fingerprint)
        self._empty = 0 if entries else self._empty + 1
        if self._empty == MAX_EMPTY_PAGES:
            raise ValueError(f"{MAX_EMPTY_PAGES} pages in a row listed nothing: the listing would never end")
        if token in self._tokens:
            raise ValueError(f"a page repeated the {self.token_name} of an earlier one: the listing would never end")
        if token is not None:
            self._tokens.add(token)
