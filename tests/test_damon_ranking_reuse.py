"""damon-live ranks a monitor's regions once per aggregation: while the monitor reports the same
regions, each step goes on down the last ranking instead of reading the pagemap again, and a
range that fails goes once to that ranking's end (live/run.py, _DamonCollapses)."""
import importlib
import types

import pytest

run = importlib.import_module("superpager.live.run")


class FakeMonitor:
    def __init__(self):
        self.regions = [(0, 8 << 20, 5)]

    def hot_regions(self):
        return list(self.regions)  # a new list each time, as both monitors build one


class FakeCollapser:
    def __init__(self, _pid, _reserve):
        self.tried = []
        self.fail = set()

    def collapse(self, addr):
        self.tried.append(addr)
        return (False, "eagain", 11) if addr in self.fail else (True, "", 0)

    def reserve_counters(self):
        return "{}"


@pytest.fixture
def collapses(monkeypatch):
    ranks = []

    def live_rank(_pid, regions):
        ranks.append(list(regions))
        # Ten 2MB ranges, hottest first; the ranking's order is all the step uses.
        return [(a << 21, 10.0 - a) for a in range(10)]

    monkeypatch.setattr(run, "_core", types.SimpleNamespace(LiveCollapser=FakeCollapser, live_rank=live_rank))
    mon = FakeMonitor()
    return run._DamonCollapses(mon, 1234, "off"), mon, ranks


def test_one_ranking_serves_every_step_until_the_monitor_reports_new_regions(collapses):
    c, mon, ranks = collapses
    assert c.step(4) == (True, True)
    assert c.step(4) == (True, True)
    assert len(ranks) == 1, "the same regions: the ranking is reused"
    assert c.collapser.tried == [a << 21 for a in range(8)], "hottest first, none tried twice"
    assert c.step(4) == (True, False), "the last two ranges: nothing left after them"
    assert c.step(4) == (False, False), "the ranking is used up and the regions have not changed"
    assert len(ranks) == 1 and c.counts["rankings"] == 1 and c.counts["rankings_reused"] == 3
    mon.regions = [(0, 8 << 20, 7)]  # the monitor's next aggregation
    assert c.step(4) == (True, True)
    assert len(ranks) == 2 and c.counts["rankings"] == 2 and c.counts["regions_seen"] == 2
    assert c.counts["collapsed"] == 14


def test_a_failed_range_is_tried_once_more_at_the_end_of_the_ranking(collapses):
    c, _mon, ranks = collapses
    c.collapser.fail = {0}
    assert c.step(4) == (True, True)
    assert c.failed == {"eagain": 1} and c.counts["retried"] == 1
    c.step(4), c.step(4)
    assert c.collapser.tried == [a << 21 for a in range(10)] + [0], "after the ranking's other ranges"
    c.collapser.fail = set()
    assert c.step(4) == (False, False), "tried twice: nothing left of this ranking"
    assert len(ranks) == 1 and c.counts["collapsed"] == 9


def test_a_transient_failure_collapses_on_its_retry(collapses):
    c, _mon, _ranks = collapses
    c.collapser.fail = {0}
    assert c.step(1) == (True, False), "the step's one collapse failed: wait an interval"
    c.collapser.fail = set()  # the page is back on the LRU
    while c.step(4)[0]:
        pass
    assert c.collapser.tried.count(0) == 2 and c.counts["collapsed"] == 10 and c.failed == {"eagain": 1}


def test_a_range_failing_twice_waits_for_the_next_aggregation(collapses):
    c, mon, ranks = collapses
    c.collapser.fail = {0}
    for _ in range(4):
        c.step(10)
    assert c.collapser.tried.count(0) == 2 and c.failed == {"eagain": 2} and c.counts["retried"] == 1
    mon.regions = [(0, 8 << 20, 9)]
    c.step(10)
    assert len(ranks) == 2 and c.collapser.tried.count(0) == 3 and c.counts["retried"] == 2, "a new ranking retries afresh"


def test_no_accessed_region_ranks_nothing(collapses):
    c, mon, ranks = collapses
    mon.regions = []
    assert c.step(4) == (False, False)
    assert ranks == [] and c.counts["no_hot_regions"] == 1 and c.counts["rankings"] == 0


def test_pending_is_false_when_every_collapse_of_the_step_failed(collapses):
    c, _mon, _ranks = collapses
    c.collapser.fail = set(a << 21 for a in range(10))
    assert c.step(4) == (True, False), "a failing kernel is not retried at once"
