"""A principal's display name (docs/http-api.md, "The person's name"), in-process: which claim names a person,
and that the name rides beside the identity without changing it."""

from __future__ import annotations

from gateway.auth.chain import NAME_CLAIMS, Principal, display_name
from gateway.auth.oauth_tokens import OAuthIdentity


def _identity(**claims: object) -> OAuthIdentity:
    return OAuthIdentity("https://id.example.com", "s-1", frozenset(), None, {"sub": "s-1", **claims}, frozenset(), 0.0)


def test_the_default_claims_are_email_then_name_then_sub_and_a_chosen_claim_comes_first() -> None:
    assert display_name({"sub": "s-1", "name": "Ann", "email": "ann@example.com"}) == "ann@example.com"
    assert display_name({"sub": "s-1", "name": "Ann", "email": ""}) == "Ann"
    assert display_name({"sub": "s-1", "email": ["not", "a", "string"]}) == "s-1"
    assert display_name({"sub": "s-1", "preferred_username": "ann"}, ("preferred_username", "sub")) == "ann"
    assert display_name({"sub": "s-1"}, ("preferred_username", "sub")) == "s-1"
    assert display_name({"email": "a\u202eb\nc" + "x" * 300}) == "a\ufffdb\ufffdc" + "x" * 194 + "…"  # one line
    assert NAME_CLAIMS == ("email", "name", "sub")


def test_the_name_is_shown_but_the_identity_stays_issuer_and_subject() -> None:
    ann = _identity(email="ann@example.com")
    named = Principal(ann.id, "oauth", oauth=ann, name="ann@example.com")
    renamed = Principal(ann.id, "oauth", oauth=ann, name="Ann Other")
    assert named == renamed and named.id.startswith("oauth:")  # the name is not part of who it is
    assert (named.display, named.subject) == ("ann@example.com", "s-1")
    assert "ann@example.com" not in repr(named)
    assert (Principal("loopback", "loopback").display, Principal("bearer:3f2a", "bearer").display) == (
        "loopback",
        "bearer:3f2a",
    )
