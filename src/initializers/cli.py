"""The command line shared by both programs: options generated from the contract, exit codes, the last log line."""

from __future__ import annotations

import gc
import os
import shlex
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from initializers import __version__
from initializers.common.errors import ConfigError, InitializerError, Stopped
from initializers.common.uri_credentials import credentials_in, masked
from initializers.config.contract import Config, Kind
from initializers.config.registry import option_groups
from initializers.config.settings import BOOL, FALSE_WORDS, TRUE_WORDS, Setting, settings_of

if TYPE_CHECKING:
    from initializers.steps.outcome import Outcome

EXIT_OK, EXIT_FETCH_FAILED, EXIT_BAD_CONFIG = 0, 1, 2
#: Read by every source's HTTP client, as boto3 and huggingface_hub read them.
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
#: Allocations between two runs of the cyclic collector over the youngest objects (Python's default: 700).
GC_YOUNG_THRESHOLD = 10_000

_EPILOG = (
    "Every option can also be given as the environment variable named in brackets; an option wins over its "
    "variable. Exit codes: 0 done and verified, 1 the fetch failed, 2 bad configuration, a near miss of a "
    "variable's name among it (DRYRUN, OUTPUT_PAHT, or another tool's name for one: {habits}). Variables only the "
    "other program's sources read are ignored, with a warning."
)


def build_command(kind: Kind, words: list[str] | None = None) -> click.Command:
    """The program's command; `words`: positional words given by mistake, which its run refuses."""

    def callback(**options: str | None) -> NoReturn:
        exit_now(exit_code(kind, options, words or []))

    habits = [habit for _, setting in Config.settings(kind) for habit in setting.habits]
    also_reads = dict.fromkeys(variable for plugin in kind.plugins for variable in plugin.also_reads)
    return _GroupedHelp(
        _sections(kind),
        name=kind.program,
        params=options_for(Config.settings(kind), kind),
        callback=callback,
        help=f"Fetch a {kind.name} into OUTPUT_PATH [default: {kind.default_output_path}], completely or not at all.",
        epilog=f"{_EPILOG.format(habits=', '.join(habits))} Also read, without an option: "
        f"{', '.join([*also_reads, *_PROXY_VARIABLES])}.",
        context_settings={"max_content_width": 110, "terminal_width": 110, "help_option_names": ["-h", "--help"]},
    )


class _GroupedHelp(click.Command):
    """A command whose --help lists its options a section at a time: `sections`, (heading, option names)."""

    def __init__(self, sections: list[tuple[str, list[str]]], **attributes: Any) -> None:
        super().__init__(**attributes)
        self.sections = sections

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {param.name: param.get_help_record(ctx) for param in self.get_params(ctx)}
        placed = {name for _, names in self.sections for name in names}
        unplaced = [name for name in records if name not in placed]  # --version and click's own --help
        for index, (heading, names) in enumerate(self.sections):
            with formatter.section(heading):
                listed = names + unplaced if index == 0 else names
                formatter.write_dl([record for name in listed if (record := records.get(name))])


def _sections(kind: Kind) -> list[tuple[str, list[str]]]:
    """The program's options by who reads them: the shared ones, then each option group under the schemes of this
    program's sources that read it (`hf://, s3:// sources`), groups read by the same sources together."""
    sections = {"Options": [name for name, _ in Config.settings()]}
    for group in option_groups(kind.plugins):
        readers = [f"{plugin.scheme}://" for plugin in kind.plugins if group in plugin.options]
        sections.setdefault(f"{', '.join(readers)} sources", []).extend(name for name, _ in settings_of(group))
    return list(sections.items())


def options_for(settings: list[tuple[str, Setting]], kind: Kind | None = None) -> list[click.Parameter]:
    """An option per setting (its raw text, parsed later with the variables; a true-or-false one also alone, as a
    flag: `--dry-run`), and --version; helped as the `kind` program shows them (None: a program of neither kind)."""
    params: list[click.Parameter] = [
        click.Option(
            [setting.option, name],
            default=None,
            help=f"{Config.help_text(name, setting, kind) if kind else setting.help_for(None)} [{setting.env}]",
            metavar="[true|false]" if setting.codec is BOOL else "TEXT",
            is_flag=False,
            flag_value="true" if setting.codec is BOOL else None,
        )
        for name, setting in settings
    ]
    version = click.Option(
        ["--version"],
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_print_version,
        help="Show the version and exit.",
    )
    return [*params, version]


def exit_now(code: int) -> NoReturn:
    """Exit without unwinding the interpreter. By now every file is complete, synced and closed, or removed; tearing
    down the imported modules (pyarrow and pyiceberg above all) would only cost CPU."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        click.echo(__version__)
        ctx.exit(EXIT_OK)


def exit_code(kind: Kind, options: dict[str, Any], words: list[str]) -> int:
    """Parse, configure logging, run; every outcome ends in one log line saying what happened. `words`: refused."""
    from initializers import run  # deferred: --help stays fast
    from initializers.common import logs
    from initializers.process import early_stops, workspace_owner

    # Logs as they are until the settings are read, which hide the secrets they hold as they read them.
    logs.configure(None, None, secrets=())
    try:
        if words:
            raise positional_words(kind, words)
        Config.refuse_misspellings(os.environ, kind)
        config = Config.from_env(os.environ, options, kind)
    except ConfigError as exc:
        return failed(logs.get_logger(kind.program), str(exc), exc.exit_code)
    logs.configure(config.log_format, config.log_level, config.secrets())
    log = logs.get_logger(kind.program)
    for readers, variables in Config.not_read(os.environ, kind).items():
        log.warning("ignored", variables=variables, reason=f"they apply to {readers} sources, not the {kind.program}'s")
    if stayed_root_because := workspace_owner.adopt(config.output_dir(kind), log):
        log.warning("running as root", reason=stayed_root_because)
    # What the imports made lives as long as the process: the cyclic collector, which a listing's allocations
    # run again and again, need not walk it every time. Nor need it run as often as Python's default has it: a
    # listing makes a few short-lived containers per file and next to no cycles.
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD)
    if (early := early_stops.received()) is not None:
        return failed(log, f"stopped by {signal.Signals(early).name} before the run began", Stopped.exit_code)
    try:
        outcome = run.perform(config, kind, log)
    except (InitializerError, Stopped) as exc:
        return failed(log, str(exc), exc.exit_code)
    except OSError as exc:
        return failed(log, f"{exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''}", EXIT_FETCH_FAILED)
    except Exception:
        return failed(log, "internal error; please report it with this log", EXIT_FETCH_FAILED, traceback=True)
    return _done(outcome, log)


def _done(outcome: Outcome, log: Any) -> int:
    """The last log line and the termination message of a run that did its work; exit 0."""
    from initializers.process import termination

    if outcome.dry_run:
        termination.leave(f"dry run: {outcome.files} files, {outcome.bytes} bytes to fetch into {outcome.output_path}")
        log.info("dry run done", files=outcome.files, bytes=outcome.bytes, output_path=outcome.output_path)
        return EXIT_OK
    resumed = (
        f", {outcome.resumed_files} of them resumed with {outcome.kept_bytes} bytes an earlier run had fetched"
        if outcome.resumed_files
        else ""
    )
    termination.leave(
        f"done: {outcome.files} files, {outcome.bytes} bytes in {outcome.output_path} "
        f"({outcome.fetched_files} fetched, {outcome.fetched_bytes} bytes, in {outcome.seconds:.1f} s{resumed})"
    )
    log.info(
        "done",
        files=outcome.files,
        bytes=outcome.bytes,
        fetched_files=outcome.fetched_files,
        fetched_bytes=outcome.fetched_bytes,
        resumed_files=outcome.resumed_files,
        kept_bytes=outcome.kept_bytes,
        seconds=round(outcome.seconds, 3),
        mb_s=round(outcome.fetched_bytes / outcome.seconds / 1e6, 1) if outcome.seconds > 0 else None,
        output_path=outcome.output_path,
    )
    return EXIT_OK


def failed(log: Any, error: str, exit_code: int, traceback: bool = False) -> int:
    """The last log line and the termination message of a failed run; returns its exit code."""
    from initializers.process import termination

    termination.leave(f"failed (exit {exit_code}): {error}")
    (log.exception if traceback else log.error)("failed", error=error, exit_code=exit_code)
    return exit_code


def main(kind: Kind) -> None:
    flags = {setting.option for _, setting in Config.settings(kind) if setting.codec is BOOL}
    args, words = _options_only(sys.argv[1:], flags)
    build_command(kind, words).main(args=args, prog_name=kind.program)


#: Programs a runtime's appended command starts with (Kubeflow's is `bash -c "python -m pkg.initializers.<kind>"`).
_APPENDED_COMMANDS = frozenset({"sh", "bash", "dash", "python", "python3"})


def _options_only(argv: list[str], flags: set[str]) -> tuple[list[str], list[str]]:
    """(the options, the positional words) of `argv`, less a command a runtime appended to an exec-form entrypoint
    (`bash -c "python -m pkg.initializers.dataset"`), which is dropped. The programs take no positional arguments, so
    the first word that is not an option or an option's value starts either such a command (its first word a shell or
    python) or words given by mistake, which the run refuses (`positional_words`). A true-or-false option (`flags`)
    takes the next word as its value only when it is one (`--dry-run true`); alone it is a flag."""
    for index, word in enumerate(argv):
        if not word.startswith("-") and (index == 0 or not _takes_value(argv[index - 1], word, flags)):
            appended = os.path.basename(word) in _APPENDED_COMMANDS
            return argv[:index], [] if appended else argv[index:]
    return argv, []


def _takes_value(option: str, word: str, flags: set[str]) -> bool:
    if not option.startswith("--") or "=" in option or option in ("--help", "--version"):
        return False
    return option not in flags or word.strip().lower() in TRUE_WORDS | FALSE_WORDS


def positional_words(kind: Kind, words: list[str]) -> ConfigError:
    """The error for words given as arguments: they are read from variables (or options), and which ones is said
    when it is clear: a URI is the source, a word after it the destination. A signed URL's credentials are hidden
    and masked (`uri_credentials`), as STORAGE_URI's are."""
    from initializers.common import logs

    for secret in (secret for word in words for secret in credentials_in(word)):
        logs.hide(secret)
    words = [masked(word) for word in words]
    refused = f"the {kind.program} takes no positional arguments (got {' '.join(map(shlex.quote, words))})"
    uri, *rest = words
    if "://" in uri and len(rest) <= 1:
        named = [("STORAGE_URI", uri), *([("OUTPUT_PATH", rest[0])] if rest else [])]
        variables = " ".join(f"{name}={shlex.quote(value)}" for name, value in named)
        options = " ".join(f"--{name.lower().replace('_', '-')} {shlex.quote(value)}" for name, value in named)
        return ConfigError(f"{refused}: set {variables}, or give {options}")
    return ConfigError(
        f"{refused}: give the source as STORAGE_URI=... (or --storage-uri ...) and the destination as OUTPUT_PATH=... "
        "(or --output-path)"
    )
