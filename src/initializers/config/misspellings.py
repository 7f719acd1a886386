"""Near misses of the contract's variable names (`OUTPUT_PAHT`), told apart from the other variables a pod holds.

A variable is a misspelling of one of ours when it has our names' shape and differs from one in a single word by a slip
of the keys: one letter added, dropped, changed, or two swapped (two slips in a word of 8 letters or more); in a word of
3 letters, an abbreviation, the slip keeps the first letter (`STORAGE_URL` is a slip of `STORAGE_URI`, but `HEAD_GPU`
another resource than `HEAD_CPU`). So are our letters with a `_` missing, added or moved (`DRYRUN`, `DRY__RUN`,
`_DRY_RUN`), except `LOGLEVEL`, which torchrun and many Python programs read; ours (or a slip of one) in the wrong case
(`storage_uri`), which Linux, reading variables case-sensitively, would ignore; and another tool's name for one of our
settings that users set by habit (`ACCESS_KEY`, `HF_HUB_TOKEN`: `Setting.habits`). Never one of another tool (`AWS_*`,
`HF_*`, ... in any case), nor the lower-case names other tools own (`http_proxy`, ...), nor the variables Kubernetes
sets for each service (`FOO_SERVICE_HOST`, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

#: Variables of other tools (boto3, huggingface_hub, the system) are never misspellings of ours.
FOREIGN_PREFIXES = ("AWS_", "HF_", "HUGGINGFACE_", "KUBERNETES_", "PYTHON", "LC_", "XDG_")
#: What Kubernetes sets for every service of the namespace (`FOO_SERVICE_HOST`, `FOO_PORT_443_TCP_ADDR`, ...).
_SERVICE_VARIABLE = re.compile(r"\w+_(?:SERVICE_HOST|SERVICE_PORT(?:_\w+)?|PORT(?:_\d+_(?:TCP|UDP|SCTP)(?:_\w+)?)?)")
#: Lower-case names other tools own (curl, wget, requests and Go read the proxies in lower case): never a slip of ours.
#: No other is exempt: none of ours is a lower-case variable of note elsewhere (no `home`, `path`).
_OTHERS_LOWER_CASE = frozenset({"http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy"})
#: Names of other tools' that differ from one of ours only in their `_`s: never a slip of ours.
_OTHERS_JOINED = frozenset({"LOGLEVEL"})
_OUR_SHAPE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*")
#: Our names' letters with their `_`s anywhere: `DRY__RUN`, `_DRY_RUN`.
_LOOSE_SHAPE = re.compile(r"[A-Z0-9_]*[A-Z][A-Z0-9_]*")
#: Words up to `_ABBREVIATION` letters keep their first letter through a slip; from `_LONG_WORD` letters on, two.
_ABBREVIATION, _LONG_WORD = 3, 8


def misspelt(env: Iterable[str], known: Iterable[str], habits: Mapping[str, str] | None = None) -> dict[str, str]:
    """{given: meant} for each variable of `env` that is a near miss of one of the `known` ones, or one of `habits`
    ({another tool's name for one of our settings: ours}, `ACCESS_KEY`: `ACCESS_KEY_ID`), in any case."""
    ours = {name: name.split("_") for name in known}
    joined = {name.replace("_", ""): name for name in ours}  # by letters: `DRYRUN`, `DRY__RUN` are `DRY_RUN`'s
    found = {}
    for name in env:
        upper = name.upper()
        if habits and upper in habits:
            found[name] = habits[upper]
            continue
        if name in ours or name in _OTHERS_LOWER_CASE or not _LOOSE_SHAPE.fullmatch(upper):
            continue
        if upper.startswith(FOREIGN_PREFIXES) or _SERVICE_VARIABLE.fullmatch(upper) or upper in _OTHERS_JOINED:
            continue
        meant = upper if upper in ours else joined.get(upper.replace("_", ""))
        if meant is None and _OUR_SHAPE.fullmatch(upper):
            words = upper.split("_")
            meant = next((ok for ok, its in ours.items() if _one_word_slipped(words, its)), None)
        if meant is not None:
            found[name] = meant
    return found


def message(found: Mapping[str, str]) -> str:
    """The sentence naming each misspelt variable and the one it was meant to be."""
    return "; ".join(
        f"{given} is not a variable these programs read; did you mean {meant}?" for given, meant in found.items()
    )


def _one_word_slipped(words: list[str], ours: list[str]) -> bool:
    differing = [(given, our) for given, our in zip(words, ours, strict=False) if given != our]
    if len(words) != len(ours) or len(differing) != 1:
        return False
    given, our = differing[0]
    if min(len(given), len(our)) <= _ABBREVIATION and given[:1] != our[:1]:
        return False
    return _slips(given, our) <= (2 if len(our) >= _LONG_WORD else 1)


def _slips(a: str, b: str) -> int:
    """Letters added, dropped, changed or swapped with a neighbour turning `a` into `b` (optimal string alignment)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[len(b)]
