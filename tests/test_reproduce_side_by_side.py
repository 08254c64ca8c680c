"""`reproduce all` runs the papers side by side on several workers, one after another on one;
traces they share are made once."""
import os
import threading

import pytest

from superpager import reproduce as R


@pytest.fixture
def two_papers(monkeypatch):
    """Two stand-in papers that each wait for the other to have started (a barrier)."""
    barrier = threading.Barrier(2, timeout=20)
    log: list[str] = []

    def paper(name):
        def run(quick=False, progress=lambda m: None):
            log.append(f"{name} start")
            progress("working")
            barrier.wait()
            log.append(f"{name} end")
            return f"## {name}"
        return run

    monkeypatch.setattr(R, "EXPERIMENTS", {"a": paper("a"), "b": paper("b")})
    return barrier, log


def test_papers_run_side_by_side_and_keep_their_order(two_papers):
    _barrier, log = two_papers
    said: list[str] = []
    assert R.run_papers(["a", "b"], True, 2, said.append) == ["## a", "## b"]
    # Both started before either ended: they ran at the same time.
    assert set(log[:2]) == {"a start", "b start"}
    assert "a: working" in said and "b: done" in said
    assert not R.SIDE_BY_SIDE


def test_one_worker_runs_the_papers_one_after_another(two_papers):
    barrier, log = two_papers
    barrier._timeout = 0.5  # alone at the barrier, a paper gives up
    with pytest.raises(threading.BrokenBarrierError):
        R.run_papers(["a", "b"], True, 1, lambda m: None)
    assert log == ["a start"]


def test_a_trace_two_papers_want_is_made_once(tmp_path):
    made = []

    def make(tmp):
        made.append(tmp)
        assert tmp.endswith(".partial")
        with open(tmp, "w") as f:
            f.write("x")

    path = str(tmp_path / "t.spt")
    threads = [threading.Thread(target=R.cached_trace, args=(path, "making", make, lambda m: None)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [f"{path}.{os.getpid()}.partial"]
    assert os.listdir(tmp_path) == ["t.spt"]


def test_another_process_making_the_same_trace_is_left_alone(tmp_path):
    # Another reproduce command is writing the same trace: its partial file keeps its bytes,
    # and ours is renamed into place whole.
    path = str(tmp_path / "t.spt")
    theirs = f"{path}.999999999.partial"
    with open(theirs, "w") as f:
        f.write("half")

    def make(tmp):
        assert tmp != theirs
        with open(tmp, "w") as f:
            f.write("whole")

    R.cached_trace(path, "making", make, lambda m: None)
    assert open(path).read() == "whole"
    assert open(theirs).read() == "half"


def test_a_failed_make_leaves_no_trace_behind(tmp_path):
    def make(tmp):
        open(tmp, "w").close()
        raise RuntimeError("capture failed")

    path = str(tmp_path / "t.spt")
    with pytest.raises(RuntimeError):
        R.cached_trace(path, "making", make, lambda m: None)
    assert os.listdir(tmp_path) == []
