"""`query_parameters` agrees with the standard library's parser on every query string."""

from urllib.parse import parse_qsl, quote

from hypothesis import given
from hypothesis import strategies as st

from transforms.ingest.query import query_parameters


def reference(query: str) -> dict[str, str]:
    """What Werkzeug's `request.args.to_dict()` gives: parse_qsl, blanks kept, first name wins."""
    out: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True, errors="replace"):
        out.setdefault(name, value)
    return out


def test_a_callback_query() -> None:
    q = "secret=s%2Fx&app_token=abc&event_token=&created_at=1763700000&country=de&user_id=a+b&adid=1&adid=2&flag"
    assert query_parameters(q) == {
        "secret": "s/x",
        "app_token": "abc",
        "event_token": "",
        "created_at": "1763700000",
        "country": "de",
        "user_id": "a b",
        "adid": "1",
        "flag": "",
    }


def test_invalid_percent_escapes_become_replacement_characters() -> None:
    assert query_parameters("a=%FF%FE&b=%zz&c=%E2%82%AC") == {"a": "\ufffd\ufffd", "b": "%zz", "c": "€"}


pieces = st.sampled_from(["a", "b", "=", "&", "%", "+", "%2B", "%3D", "%26", "%FF", "%e2%82%ac", "é", " ", "x1"])


@given(st.lists(pieces, max_size=30).map("".join))
def test_same_as_the_standard_library_on_any_query(query: str) -> None:
    assert query_parameters(query) == reference(query)


@given(st.dictionaries(st.text(min_size=1), st.text(), max_size=8))
def test_round_trips_any_encoded_parameters(params: dict[str, str]) -> None:
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params.items())
    assert query_parameters(query) == params
