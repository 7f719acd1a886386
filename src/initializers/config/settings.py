"""The toolkit schemas are declared with: codecs, `Setting`s on dataclass fields, groups of them, and parsing.

A schema is a frozen dataclass whose fields each carry a `Setting` (`setting_field`) or hold a group of such
fields (`group_field`), so an option set can be declared beside the code that reads it and still be part of
one flat set of variables. Light on purpose: every program imports it before `--help`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from initializers.common.errors import ConfigError
from initializers.common.uri_credentials import credentials_in

T = TypeVar("T")
S = TypeVar("S")


@dataclass(frozen=True)
class Codec(Generic[T]):
    """Turns one variable's text into a typed value and back; `expected` completes error messages."""

    parse: Callable[[str], T]
    format: Callable[[T], str]
    expected: str
    empty_means_unset: bool = True


def checked_value(raw: str, variable: str, secret: bool = False) -> str:
    """`raw` without the one trailing newline (LF or CRLF) a Kubernetes Secret made from a file carries; a ConfigError
    naming `variable`, never the value, for any other control character (tab included): every value may end up in a
    request line, a header or a URL, where one would end it or start another. A `secret` (a token, a key) must also
    be ASCII, as they all are: it goes into a header as it is."""
    text = raw[:-2] if raw.endswith("\r\n") else raw[:-1] if raw.endswith("\n") else raw
    bad = next((char for char in text if char < " " or char == "\x7f" or (secret and not char.isascii())), None)
    if bad is not None:
        kind, rule = (
            ("control character", "only a single trailing newline is accepted, and dropped")
            if bad.isascii()
            else ("character outside ASCII", "tokens and keys are ASCII")
        )
        raise ConfigError(
            f"{variable}: contains the {kind} U+{ord(bad):04X} at position {text.index(bad)} (value not shown); {rule}"
        )
    return text


def whole_number(least: int, most: float = float("inf")) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw.strip())
        if not least <= value <= most:
            raise ValueError("out of range")
        return value

    return parse


def _parse_positive_float(raw: str) -> float:
    value = float(raw.strip())
    if not value > 0 or value == float("inf"):
        raise ValueError("not a positive number")
    return value


#: The words a true-or-false value is written in, any case (empty is false too).
TRUE_WORDS, FALSE_WORDS = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS or not value:
        return False
    raise ValueError("not a boolean")


#: Rates' suffixes: binary multiples, as rclone's --bwlimit reads them.
_BANDWIDTH_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_BANDWIDTH = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)", re.IGNORECASE)


def _parse_bandwidth(raw: str) -> int:
    """Bytes per second: `50M` is 50 MiB/s."""
    found = _BANDWIDTH.fullmatch(raw.strip())
    if found is None:
        raise ValueError("not a rate")
    rate = int(float(found[1]) * _BANDWIDTH_UNITS[found[2].upper()])
    if rate < 1:
        raise ValueError("below one byte per second")
    return rate


def choice(*choices: str) -> Codec[str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError("not a choice")
        return value

    return Codec(parse, str, "one of " + ", ".join(choices))


TEXT: Codec[str] = Codec(str.strip, str, "text")
POSITIVE_INT: Codec[int] = Codec(whole_number(1), str, "a positive integer")
NON_NEGATIVE_INT: Codec[int] = Codec(whole_number(0), str, "an integer, 0 or more")
POSITIVE_NUMBER: Codec[float] = Codec(_parse_positive_float, repr, "a positive number")
BOOL: Codec[bool] = Codec(_parse_bool, lambda value: "true" if value else "false", "true or false")
BANDWIDTH: Codec[int] = Codec(
    _parse_bandwidth, str, "bytes per second, a number optionally followed by K, M, G or T (binary: 1K = 1024)"
)


#: A setting's --help: text, or a function of the program (`Kind`) for one that differs (sources, folders, defaults).
HelpText = str | Callable[[Any], str]


@dataclass(frozen=True)
class Setting:
    """How one schema field appears in the environment and on the command line."""

    env: str
    help: HelpText
    codec: Codec[Any]
    secret: bool = False
    fallback_env: tuple[str, ...] = ()
    #: For a secret whose value is not all secret (a connection string: its key is, its endpoint is not), the parts
    #: the logs hide; None: the whole value.
    secret_parts: Callable[[str], list[str]] | None = None
    #: Names other tools give this setting, which users set by habit (`ACCESS_KEY` for ACCESS_KEY_ID): no program
    #: reads them, so each is refused as a near miss of this setting's variables (`misspellings`).
    habits: tuple[str, ...] = ()

    def secrets_in(self, value: Any) -> list[str]:
        """The secrets this setting's value holds: a secret's (or its `secret_parts`), and in any other value that is
        a URL (STORAGE_URI, an endpoint) the credentials in its query or user information."""
        if not isinstance(value, str) or not value:
            return []
        if self.secret:
            return self.secret_parts(value) if self.secret_parts else [value]
        return credentials_in(value) if "://" in value else []

    @property
    def option(self) -> str:
        return "--" + self.env.lower().replace("_", "-")

    def help_for(self, program: Any) -> str:
        """The help text as `program` (a `Kind`; None outside the two programs) shows it."""
        return self.help(program) if callable(self.help) else self.help


def setting_field(env: str, help: HelpText, codec: Codec[Any] = TEXT, default: Any = None, **extra: Any) -> Any:
    """A schema field read from the variable `env` (and the option named after it)."""
    return field(default=default, metadata={"setting": Setting(env, help, codec, **extra)})


def patterns_field(env: str, help: HelpText, *, empty_means_unset: bool = True) -> Any:
    """Comma-separated globs read from `env` (messages name it), as the Kubeflow SDK joins them; blanks around and
    between commas are dropped; `empty_means_unset=False`: empty is the empty list."""

    def parse(raw: str) -> tuple[str, ...]:
        given = tuple(part.strip() for part in raw.split(",") if part.strip())
        for pattern in given:
            if pattern.startswith("/"):
                raise ConfigError(
                    f"{env}: {pattern!r} starts with '/', but patterns match paths relative to the source root "
                    f"(write {pattern.lstrip('/')!r})"
                )
        return given

    def write(given: tuple[str, ...]) -> str:
        for pattern in given:
            if "," in pattern:
                raise ConfigError(f"{env}: pattern {pattern!r} contains ',', which the list form cannot carry")
        return ",".join(given)

    return setting_field(env, help, Codec(parse, write, "comma-separated glob patterns", empty_means_unset))


def group_field(group: type) -> Any:
    """A schema field holding a whole group of settings (a schema of its own): its settings are the schema's."""
    return field(default_factory=group, metadata={"group": group})


def setting_fields(schema: type) -> Iterator[dataclasses.Field[Any]]:
    """Every field of `schema` that carries a setting, groups' fields in their place, in declaration order."""
    for found in dataclasses.fields(schema):
        group = found.metadata.get("group")
        if group is not None:
            yield from setting_fields(group)
        elif "setting" in found.metadata:
            yield found


def settings_of(schema: type) -> list[tuple[str, Setting]]:
    """(field name, setting) for every variable a schema declares, groups flattened, in declaration order."""
    return [(f.name, f.metadata["setting"]) for f in setting_fields(schema)]


def build(schema: type[S], values: Mapping[str, Any]) -> S:
    """An instance of `schema` from {field name: value} over its flattened fields; each group is built from its
    own fields' values, and fields not given keep their defaults."""
    unknown = set(values) - {f.name for f in setting_fields(schema)}
    if unknown:
        raise TypeError(f"{schema.__name__} has no setting {', '.join(sorted(unknown))}")
    return _built(schema, values)


def _built(schema: type[S], values: Mapping[str, Any]) -> S:
    given: dict[str, Any] = {}
    for found in dataclasses.fields(schema):  # type: ignore[arg-type]
        group = found.metadata.get("group")
        if group is not None:
            given[found.name] = _built(group, values)
        elif found.name in values and "setting" in found.metadata:
            given[found.name] = values[found.name]
    return schema(**given)


def values_of(instance: Any) -> dict[str, Any]:
    """{field name: value} for every setting of a schema instance, groups flattened."""
    values: dict[str, Any] = {}
    for found in dataclasses.fields(instance):
        value = getattr(instance, found.name)
        if "group" in found.metadata:
            values.update(values_of(value))
        elif "setting" in found.metadata:
            values[found.name] = value
    return values


def env_of(instance: Any) -> dict[str, str]:
    """The variables that reproduce a schema instance: the settings that differ from their defaults."""
    values = values_of(instance)
    env: dict[str, str] = {}
    for found in setting_fields(type(instance)):
        value = values[found.name]
        if value is not None and value != found.default:
            setting = found.metadata["setting"]
            env[setting.env] = setting.codec.format(value)
    return env


def parse_schema(schema: type[S], env: Mapping[str, str], options: Mapping[str, str | None] | None = None) -> S:
    """A schema parsed from variables and raw option values; an option given wins over its variable."""
    values: dict[str, Any] = {}
    for name, setting in settings_of(schema):
        option = (options or {}).get(name)
        if option is not None:
            source, raw = setting.option, option
        else:
            source, raw = next(
                ((var, env[var]) for var in (setting.env, *setting.fallback_env) if var in env), (None, None)
            )
        if raw is None:
            continue
        if secrets := setting.secrets_in(raw):  # hidden before any message can quote them (logs: imported only now)
            from initializers.common import logs

            for secret in secrets:
                logs.hide(secret)
        raw = checked_value(raw, source or setting.env, setting.secret)
        if setting.codec.empty_means_unset and not raw.strip():
            continue
        try:
            values[name] = setting.codec.parse(raw)
        except ConfigError:
            raise  # a codec's own, more precise message
        except ValueError:
            shown = "***" if setting.secret else repr(raw)
            raise ConfigError(f"{source}: expected {setting.codec.expected}, got {shown}") from None
    return build(schema, values)
