"""The schema toolkit: groups of settings declared apart read, build and write as one flat set of variables."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from initializers.common.errors import ConfigError
from initializers.config.settings import (
    POSITIVE_INT,
    build,
    env_of,
    group_field,
    parse_schema,
    setting_field,
    settings_of,
    values_of,
)


@dataclass(frozen=True)
class _Inner:
    depth: int | None = setting_field("DEPTH", "How deep.", POSITIVE_INT)


@dataclass(frozen=True)
class _Group:
    colour: str = setting_field("COLOUR", "Which colour.", default="red")
    inner: _Inner = group_field(_Inner)


@dataclass(frozen=True)
class _Schema:
    name: str | None = setting_field("NAME", "A name.")
    group: _Group = group_field(_Group)
    size: int | None = setting_field("SIZE", "A size.", POSITIVE_INT)


def test_groups_are_flattened_in_declaration_order():
    assert [(name, s.env) for name, s in settings_of(_Schema)] == [
        ("name", "NAME"), ("colour", "COLOUR"), ("depth", "DEPTH"), ("size", "SIZE")
    ]  # fmt: skip


def test_variables_land_in_their_groups_and_are_written_back_from_them():
    schema = parse_schema(_Schema, {"NAME": "a", "DEPTH": "3", "SIZE": "2"}, {"colour": "blue"})
    assert schema == _Schema(name="a", group=_Group(colour="blue", inner=_Inner(depth=3)), size=2)
    assert values_of(schema) == {"name": "a", "colour": "blue", "depth": 3, "size": 2}
    assert env_of(schema) == {"NAME": "a", "COLOUR": "blue", "DEPTH": "3", "SIZE": "2"}
    assert parse_schema(_Schema, env_of(schema)) == schema
    assert env_of(_Schema()) == {}  # defaults are not written


def test_build_takes_flat_values_and_refuses_names_no_group_declares():
    assert build(_Schema, {"depth": 1}) == _Schema(group=_Group(inner=_Inner(depth=1)))
    with pytest.raises(TypeError, match="_Schema has no setting depht"):
        build(_Schema, {"depht": 1})


def test_a_grouped_settings_error_names_its_variable():
    with pytest.raises(ConfigError, match="DEPTH: expected a positive integer, got '0'"):
        parse_schema(_Schema, {"DEPTH": "0"})


def test_a_help_text_may_be_a_function_of_the_program_reading_it():
    @dataclass(frozen=True)
    class Program:
        folder: str

    @dataclass(frozen=True)
    class Per:
        where: str | None = setting_field("WHERE", lambda program: f"Folder [default: {program.folder}].")

    [(_, setting)] = settings_of(Per)
    assert setting.help_for(Program("/a")) == "Folder [default: /a]."
    assert setting.help_for(Program("/b")) == "Folder [default: /b]."
    assert settings_of(_Schema)[0][1].help_for(Program("/a")) == "A name."
