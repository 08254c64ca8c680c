"""The live policies' CPU budget (`max_cpu`, python/superpager/live/budget.py): a fixed share, and
`auto`, which follows the CPU the machine leaves idle. No root or live process needed: the
machine's /proc/stat is injected."""
import pytest

from superpager.live import budget as bd
from superpager.live.policies import parse_policy


class FakeStat:
    """/proc/stat of a machine of `cpus` CPUs whose idle share moves as the test says."""

    def __init__(self, cpus: int = 2):
        self.cpus, self.idle, self.total = cpus, 0.0, 0.0

    def advance(self, seconds: float, idle_cpus: float) -> None:
        self.idle += idle_cpus * seconds * 100
        self.total += self.cpus * seconds * 100

    def __call__(self):
        return self.idle, self.total, self.cpus


def test_a_fixed_share_allows_share_times_elapsed():
    b = bd.Budget(0.5, t0=10.0, own_cpu0=0.0)
    for t in (10.3, 11.0, 12.5, 14.0):
        b.update(t, own_cpu=0.0)
        assert b.share() == 0.5
        assert b.allowance() == pytest.approx(0.5 * (t - 10.0))
    assert b.summary() == {"max_cpu": 0.5, "mean": 0.5, "min": 0.5, "max": 0.5}


def test_auto_takes_the_idle_cpu_plus_its_own_between_floor_and_one():
    st = FakeStat(cpus=2)
    b = bd.Budget("auto", t0=0.0, own_cpu0=0.0, stat=st)
    assert b.share() == bd.START  # nothing measured yet
    # A single-threaded program on one CPU of two, the policy idle: one CPU is free.
    st.advance(1.0, idle_cpus=1.0)
    b.update(1.0, own_cpu=0.0)
    assert b.share() == pytest.approx(1.0)
    # The policy used 0.4 of a CPU and the machine 0.3 more were idle: 0.7 is what nobody else wanted.
    st.advance(1.0, idle_cpus=0.3)
    b.update(2.0, own_cpu=0.4)
    assert b.share() == pytest.approx(0.7)
    # Both CPUs busy with other work: the floor.
    st.advance(1.0, idle_cpus=0.0)
    b.update(3.0, own_cpu=0.4)
    assert b.share() == bd.FLOOR
    # Four idle CPUs of eight: still one CPU at most (the policy is one thread).
    st8 = FakeStat(cpus=8)
    b8 = bd.Budget("auto", t0=0.0, own_cpu0=0.0, stat=st8)
    st8.advance(1.0, idle_cpus=4.0)
    b8.update(1.0, own_cpu=0.0)
    assert b8.share() == 1.0
    s = b.summary()
    assert s["max_cpu"] == "auto" and s["min"] == bd.FLOOR and s["max"] == pytest.approx(1.0)


def test_auto_changes_the_share_once_a_window_the_first_one_short_and_credits_time_at_the_old_one():
    st = FakeStat(cpus=2)
    b = bd.Budget("auto", t0=0.0, own_cpu0=0.0, stat=st)
    st.advance(0.2, idle_cpus=1.0)
    b.update(0.2, own_cpu=0.0)
    assert b.share() == bd.START  # within the first window: not yet
    st.advance(0.05, idle_cpus=1.0)
    b.update(bd.FIRST_WINDOW_S, own_cpu=0.0)
    assert b.share() == pytest.approx(1.0)  # the first window is short
    # The first window passed at START, what follows at the new share.
    assert b.allowance() == pytest.approx(bd.START * bd.FIRST_WINDOW_S)
    # Later windows are whole ones: half a window later the share stays, though the machine
    # is now busy.
    st.advance(0.5, idle_cpus=0.0)
    b.update(bd.FIRST_WINDOW_S + 0.5, own_cpu=0.0)
    assert b.share() == pytest.approx(1.0)
    assert b.allowance() == pytest.approx(bd.START * bd.FIRST_WINDOW_S + 0.5)
    st.advance(0.5, idle_cpus=0.0)
    b.update(bd.FIRST_WINDOW_S + bd.WINDOW_S, own_cpu=0.0)
    assert b.share() == bd.FLOOR


def test_the_next_step_waits_the_interval_unless_work_is_pending_and_never_outruns_the_budget():
    from superpager.live.run import next_step_at
    # Within the budget: the interval, or at once when the last step left ready ranges.
    assert next_step_at(10.0, 0.05, pending=False, step_cpu=1.0, allowance=2.0, share=1.0) == pytest.approx(10.05)
    assert next_step_at(10.0, 0.05, pending=True, step_cpu=1.0, allowance=2.0, share=1.0) == 10.0
    # Over it (0.3 CPU s more than allowed at half a CPU): 0.6 s later, pending or not.
    for pending in (False, True):
        assert next_step_at(10.0, 0.05, pending=pending, step_cpu=2.3, allowance=2.0, share=0.5) == pytest.approx(10.6)


def test_auto_without_proc_stat_keeps_its_starting_share():
    def broken():
        raise OSError("no /proc/stat")
    b = bd.Budget("auto", t0=0.0, own_cpu0=0.0, stat=broken)
    for t in (1.0, 2.0, 3.0):
        b.update(t, own_cpu=0.0)
    assert b.share() == bd.START


def test_proc_stat_is_read_as_idle_total_and_cpus(tmp_path):
    p = tmp_path / "stat"
    p.write_text("cpu  100 5 50 800 20 1 2 3 0 0\ncpu0 50 2 25 400 10 0 1 1 0 0\ncpu1 50 3 25 400 10 1 1 2 0 0\nintr 12345\n")
    assert bd.read_proc_stat(str(p)) == (820.0, 981.0, 2)
    idle, total, cpus = bd.read_proc_stat()  # this machine's
    assert total >= idle > 0 and cpus >= 1


def test_max_cpu_spec_defaults_to_auto_and_refuses_what_is_not_a_share():
    assert parse_policy("navarro-live").params["max_cpu"] == "auto"
    assert parse_policy("damon-live").params["max_cpu"] == "auto"
    assert parse_policy("navarro-live:max_cpu=0.25").params["max_cpu"] == 0.25
    assert parse_policy("navarro-live:max_cpu=0.25").spec() == "navarro-live:max_cpu=0.25"
    assert parse_policy("navarro-live:max_cpu=auto").spec() == "navarro-live"
    for bad in ("0", "1.5", "-1", "lots", ""):
        with pytest.raises(ValueError, match="max_cpu must be auto or a share of one CPU"):
            parse_policy(f"navarro-live:max_cpu={bad}")
