"""The checker's own tests: it must see every kind of violation it claims
to see, and nothing in what a lock allows. Run by ctest (label faults) and
by `python3 -m unittest faults/check_test.py`."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402


def log(*sections, lost=None):
    """Log lines of one client: (start, end, token[, side, permits, limit])."""
    events = []
    for section in sections:
        start, end, token, *rest = section
        side, permits, limit = (rest + ["exclusive", 1, None])[:3] if rest else ("exclusive", 1, None)
        events.append(dict(ev="acquired", t=start, token=token, valid_until=end + 10, side=side, permits=permits,
                           limit=limit))
        if lost is not None and start < lost < end:
            events.append(dict(ev="lost", t=lost, valid_until=lost))
        events.append(dict(ev="releasing", t=end, token=token, valid_until=end + 10))
        events.append(dict(ev="released", t=end, token=token))
    return events


def grants(logs):
    return check.check(logs, [], [], 0, [])["double_grants"]


class ExclusiveSections(unittest.TestCase):
    def test_sections_one_after_another_are_no_double_grant(self):
        self.assertEqual(grants({"a": log((0, 1, 1)), "b": log((1, 2, 2))}), 0)

    def test_overlapping_exclusive_sections_are_a_double_grant(self):
        self.assertEqual(grants({"a": log((0, 2, 1)), "b": log((1, 3, 2))}), 1)

    def test_an_overlap_after_the_loss_was_signalled_is_not_a_double_grant(self):
        self.assertEqual(grants({"a": log((0, 3, 1), lost=1.0), "b": log((1.5, 4, 2))}), 0)

    def test_a_section_of_the_same_client_is_never_its_own_rival(self):
        self.assertEqual(grants({"a": log((0, 2, 1), (1, 3, 2))}), 0)


class ReadWriteSections(unittest.TestCase):
    def test_readers_may_overlap(self):
        self.assertEqual(grants({"r1": log((0, 2, 1, "shared")), "r2": log((1, 3, 1, "shared"))}), 0)

    def test_a_writer_overlapping_a_reader_is_a_double_grant(self):
        self.assertEqual(grants({"r": log((0, 2, 1, "shared")), "w": log((1, 3, 2))}), 1)
        self.assertEqual(grants({"w": log((0, 2, 2)), "r": log((1, 3, 2, "shared"))}), 1)


class Permits(unittest.TestCase):
    def test_holders_within_the_limit_are_no_double_grant(self):
        logs = {c: log((i, i + 2, 0, "permit", 1, 2)) for i, c in enumerate("abc")}
        self.assertEqual(grants(logs), 0)  # at most two at any instant

    def test_more_permits_than_the_limit_at_one_instant_is_a_double_grant(self):
        logs = {"a": log((0, 3, 0, "permit", 1, 2)), "b": log((1, 3, 0, "permit", 1, 2)),
                "c": log((2, 4, 0, "permit", 1, 2))}
        result = check.check(logs, [], [], 0, [])
        self.assertEqual(result["double_grants"], 1)
        self.assertEqual(result["double_grant_details"][0]["permits_held"], 3)

    def test_a_request_of_several_permits_counts_each(self):
        logs = {"a": log((0, 3, 0, "permit", 2, 3)), "b": log((1, 3, 0, "permit", 2, 3))}
        self.assertEqual(grants(logs), 1)

    def test_over_the_limit_after_a_loss_is_an_overlap_not_a_double_grant(self):
        logs = {"a": log((0, 3, 0, "permit", 1, 1), lost=1.0), "b": log((2, 4, 0, "permit", 1, 1))}
        result = check.check(logs, [], [], 0, [])
        self.assertEqual(result["double_grants"], 0)
        self.assertEqual(result["overlaps"], 1)

    def test_a_permit_given_back_and_taken_at_the_same_instant_is_no_overlap(self):
        logs = {"a": log((0, 1, 0, "permit", 1, 1)), "b": log((1, 2, 0, "permit", 1, 1))}
        self.assertEqual(grants(logs), 0)


class FencedStorage(unittest.TestCase):
    def test_a_token_after_a_larger_one_or_used_by_two_writers_is_stale(self):
        accepted = [b"5 a", b"7 b", b"6 c", b"7 d"]
        self.assertEqual([s["token"] for s in check.stale_accepted(accepted)], [6, 7])


if __name__ == "__main__":
    unittest.main()
