"""math_exact's answer matching on numbers past Python's int-string limit (4,300 digits): a
correct 5,000-digit answer was a verify_failed error (ValueError inside Fraction) instead of
reward 1; such numbers are compared as text."""

from __future__ import annotations

from gym_metrics_servers.math_exact.app import answers_match


def test_a_number_past_the_int_string_limit_is_compared_as_text() -> None:
    big = "7" * 5000
    assert answers_match(big, big)
    assert not answers_match(big, "7" * 4999 + "8")
    assert answers_match("3/6", "1/2") and answers_match("1,000", "1000")  # (shorter numbers: still by value)
