"""The readers every store's listings and heads go through (`store.answers`): what they take, and what they refuse
saying what is wrong. Each store's use of them is the conformance suite's (`devkit.malformed`)."""

from __future__ import annotations

import pytest

from initializers.common.errors import FetchError
from initializers.store import answers
from initializers.store.answers import MAX_SIZE, Malformed


@pytest.mark.parametrize(
    ("value", "size"), [(0, 0), ("0", 0), ("17", 17), (MAX_SIZE, MAX_SIZE), (str(MAX_SIZE), MAX_SIZE)]
)
def test_a_byte_count_is_an_integer_or_its_digits_up_to_2_63_minus_1(value: object, size: int):
    assert answers.size(value, "the size") == size


@pytest.mark.parametrize(
    ("value", "says"),
    [(MAX_SIZE + 1, f"is {MAX_SIZE + 1} bytes, outside 0 to 2^63 - 1"), (str(10**20), "outside 0 to 2^63 - 1"),
     (-1, "is -1 bytes"), ("-1", "a string, not a byte count: '-1'"), (True, "a boolean, not a byte count"),
     (1.0, "a number, not a byte count"), ("1e3", "not a byte count"), ("\u0663", "not a byte count"),
     (None, "the size is missing"), ([1], "a list, not a byte count")],
)  # fmt: skip
def test_anything_else_is_no_byte_count(value: object, says: str):
    with pytest.raises(Malformed, match=says.replace("^", r"\^")):
        answers.size(value, "the size")


def test_records_names_and_tokens():
    assert answers.records(None, "items") == [] and answers.token("", "token") is None
    with pytest.raises(Malformed, match=r"items is an object, not a list: \{'a': 1\}"):
        answers.records({"a": 1}, "items")
    with pytest.raises(Malformed, match="a page is a list, not an object"):
        answers.record([], "a page")
    with pytest.raises(Malformed, match="the name is a string, not a name: ''"):
        answers.text("", "the name")
    with pytest.raises(Malformed, match="the token is a list"):
        answers.token(["t"], "the token")
    with pytest.raises(Malformed, match=r"x is a list, not a name: \['x{78}\.\.\.$"):  # a server's value, cut short
        answers.text(["x" * 200], "x")


def test_a_key_outside_the_prefix_is_refused_rather_than_cut_into_another_name():
    assert answers.under("d/", "d/x") == "x" and answers.under("", "other/x") == "other/x"
    with pytest.raises(Malformed, match="it lists 'other/x', which is not under the prefix 'd/' asked for"):
        answers.under("d/", "other/x")


def test_a_malformed_answer_is_a_fetch_error_naming_the_server_and_what_was_read():
    refused = pytest.raises(FetchError, match=r"^listing gs://b/d/ at http://x:1: a page is a list")
    with refused, answers.read_from("http://x:1", "listing gs://b/d/"):
        answers.record([], "a page")


def test_a_count_is_read_as_a_size_is_without_the_bytes():
    assert answers.count("12", "the rows") == 12
    with pytest.raises(Malformed, match=r"^the rows is -5, outside 0 to 2\^63 - 1$"):
        answers.count(-5, "the rows")
