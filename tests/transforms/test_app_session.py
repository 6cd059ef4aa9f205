"""App-session tokens: valid for their app and user for 15 minutes, forgeries and edits refused."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from transforms import app_session

SECRET = b"s" * 32
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_a_token_carries_its_app_and_user_until_it_expires() -> None:
    token, claims = app_session.mint(SECRET, app_id="app_1", user_id="user-1", now=NOW)
    assert token.startswith("ast_") and claims.expires_at == NOW + timedelta(minutes=15)
    assert app_session.verify(SECRET, token, now=NOW + timedelta(minutes=14, seconds=59)) == claims
    assert app_session.verify(SECRET, token, now=NOW + timedelta(minutes=15)) is None


def test_other_secrets_and_edited_tokens_are_refused() -> None:
    token, _ = app_session.mint(SECRET, app_id="app_1", user_id="user-1", now=NOW)
    assert app_session.verify(b"t" * 32, token, now=NOW) is None
    forged, _ = app_session.mint(SECRET, app_id="app_2", user_id="user-1", now=NOW)
    payload_of_other = forged.split(".")[0]
    assert app_session.verify(SECRET, payload_of_other + "." + token.split(".")[1], now=NOW) is None


@given(st.text(max_size=300))
def test_garbage_is_refused_without_raising(text: str) -> None:
    assert app_session.verify(SECRET, text, now=NOW) is None
    assert app_session.verify(SECRET, "ast_" + text, now=NOW) is None


@given(position=st.integers(4, 60), replacement=st.sampled_from("AbZ09-_."))
def test_any_single_character_change_is_refused(position: int, replacement: str) -> None:
    token, _ = app_session.mint(SECRET, app_id="app_1", user_id="user-1", now=NOW)
    position %= len(token)
    edited = token[:position] + replacement + token[position + 1 :]
    if edited != token:
        assert app_session.verify(SECRET, edited, now=NOW) is None
