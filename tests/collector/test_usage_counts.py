"""Token counts summed over an episode's turns as a policy sends them: a usage count sent as a
string beside one sent as a number stopped the whole run (TypeError, exit 1); a count that
is no number at all is unknown, never concatenated ("10" + "10" was "1010")."""

from __future__ import annotations

from gym_metrics.collector._agent_loop import add_usage


def test_counts_sent_as_digits_add_up_and_others_are_unknown() -> None:
    first = add_usage(None, {"input_tokens": "10", "output_tokens": 2, "total_tokens": "12", "input_tokens_details": {"cached_tokens": "4"}})
    assert first is not None and (first["input_tokens"], first["total_tokens"]) == (10, 12)
    both = add_usage(first, {"input_tokens": 10, "output_tokens": "3", "total_tokens": 13, "input_tokens_details": {"cached_tokens": 1}})
    assert both is not None and (both["input_tokens"], both["output_tokens"], both["total_tokens"]) == (20, 5, 25)
    assert both["input_tokens_details"] == {"cached_tokens": 5}
    odd = add_usage(both, {"input_tokens": "many", "output_tokens": True, "total_tokens": None, "input_tokens_details": {"cached_tokens": [1]}})
    assert odd is not None and (odd["input_tokens"], odd["output_tokens"], odd["total_tokens"]) == (20, 5, 25)
    assert odd["input_tokens_details"] == {"cached_tokens": None}  # an unknown count stays unknown
