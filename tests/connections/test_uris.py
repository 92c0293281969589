"""The canonical resource URI (`connections/_uris.py`): RFC 3986's own examples, and one form per resource."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connections.serving import canonical_uri, not_offered


@pytest.mark.parametrize(
    ("given_uri", "canonical"),
    [
        # RFC 3986 §6.2.2 and §6.2.2.1-3
        ("eXAMPLE://a/./b/../b/%63/%7bfoo%7d", "example://a/b/c/%7Bfoo%7D"),
        ("HTTP://www.EXAMPLE.com/", "http://www.example.com/"),
        ("http://example.com/%7Euser", "http://example.com/~user"),
        ("http://User@Example.COM:8080/a", "http://User@example.com:8080/a"),
        # §5.2.4's examples of remove_dot_segments
        ("s://h/a/b/c/./../../g", "s://h/a/g"),
        ("mid/content=5/../6", "mid/6"),
        # the red team's spellings
        ("DEMO://resource/static/document/architecture.md", "demo://resource/static/document/architecture.md"),
        ("demo://resource/dynamic/text/../../static/d/a.md", "demo://resource/static/d/a.md"),
        ("demo://resource/static/x/%2E%2E/d/%61.md", "demo://resource/static/d/a.md"),
        ("demo://resource/../../../static/d/a.md", "demo://resource/static/d/a.md"),
        # what a URI may not hold is encoded; a query and fragment are kept, their encodings normalized
        ("demo://r/a b\x01é%zz", "demo://r/a%20b%01%C3%A9%25zz"),
        ("demo://r/a?q=%2f%41#F%7e", "demo://r/a?q=%2FA#F~"),
        # what a WHATWG parser drops (RFC 3986 §6.2.3 for ports), and an http URI's empty path
        ("demo://resource:/a", "demo://resource/a"),
        ("demo://@resource/a", "demo://resource/a"),
        (" demo://resource/a\t.md\n", "demo://resource/a.md"),
        ("HTTP://Example.com:80", "http://example.com/"),
        ("https://x:0443/a", "https://x/a"),
        ("http://[::1]:8080/a", "http://[::1]:8080/a"),
        ("demo://u:p@h:12/x", "demo://u:p@h:12/x"),
    ],
)
def test_rfc_3986_syntax_based_normalization(given_uri: str, canonical: str) -> None:
    assert canonical_uri(given_uri) == canonical


def test_a_template_keeps_its_expressions() -> None:
    assert (
        canonical_uri("DEMO://Res/./text/{resourceId}/{+rest}", template=True) == "demo://res/text/{resourceId}/{+rest}"
    )
    assert canonical_uri("demo://res/text/{resourceId}") == "demo://res/text/%7BresourceId%7D"  # a URI: encoded


@given(st.text(max_size=60))
def test_the_canonical_form_is_a_fixed_point(text: str) -> None:
    once = canonical_uri(text)
    assert canonical_uri(once) == once
    assert canonical_uri(text, template=True) == canonical_uri(canonical_uri(text, template=True), template=True)


def test_one_sentence_for_a_name_a_peer_may_not_reach() -> None:
    assert not_offered("prompt", "p") == "no advertised connection offers prompt 'p'"
    assert not_offered("resource", "x" * 300) == f"no advertised connection offers resource {'x' * 200!r}"
