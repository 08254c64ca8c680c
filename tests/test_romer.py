"""Romer et al.'s policies from the CLI and the Python API: the policy family on romer95, its
costs in the cycle breakdown, parameters that follow a policy in --policies, clear errors, and
the same bytes twice."""
import json

import pytest

import superpager as sp
from superpager.cli import split_policies


@pytest.fixture(scope="module")
def zipf(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("romer") / "zipf.spt")
    sp.gen("zipf", p, size="8MiB", accesses=1_000_000, seed=3, progress=False)
    return p


def test_policy_lists_split_at_policies_not_parameters():
    assert split_policies("base,romer:fixed,size=64KiB,romer:approx-online,threshold=0.25,navarro") == [
        "base", "romer:fixed,size=64KiB", "romer:approx-online,threshold=0.25", "navarro"]
    assert split_policies("fixed:2MiB,linux-thp:enabled=always,defrag=never") == [
        "fixed:2MiB", "linux-thp:enabled=always,defrag=never"]


def test_compare_runs_the_family_and_charges_its_costs(cli, zipf):
    rc, out, err = cli("compare", zipf, "--machines", "romer95", "--policies",
                       "romer:fixed,romer:fixed,size=64KiB,romer:asap,romer:approx-online,romer:online", "--json")
    assert rc == 0, err
    rs = {r["policy"]: r for r in json.loads(out)}
    assert set(rs) == {"romer:fixed,size=4KiB", "romer:fixed,size=64KiB", "romer:asap", "romer:approx-online", "romer:online"}
    base = rs["romer:fixed,size=4KiB"]["counters"]
    for p in ("romer:approx-online", "romer:online"):
        c = rs[p]["counters"]
        assert c["walks"] < base["walks"] / 2, p
        per_miss = {"romer:approx-online": 100, "romer:online": 2570}[p]
        assert c["cycles.bookkeeping"] == per_miss * c["policy.romer.misses"]
        assert c["policy.romer.copied_bytes"] == c["copy.bytes_direct"] > 0
        # The handler: 30 cycles per miss on romer95.
        assert c["cycles.walk"] == 30 * c["walks"]
    assert rs["romer:fixed,size=64KiB"]["page_size_mix"]["64KiB"] == 1.0
    # Every touched potential superpage that stayed small has a reason.
    c = rs["romer:approx-online"]["counters"]
    assert sum(v for k, v in c.items() if k.startswith("policy.romer.not_promoted.")) > 0


def test_same_inputs_same_bytes(cli, zipf, tmp_path):
    outs = []
    for _i in range(2):
        rc, out, err = cli("simulate", zipf, "--machine", "romer95", "--policy", "romer:online", "--json")
        assert rc == 0, err
        outs.append(out)
    assert outs[0] == outs[1]


def test_offline_planning_reports_progress(zipf):
    from superpager import _core
    seen = []
    _core.Simulation(zipf, [("romer95", "romer:offline,passes=1")], progress=lambda label, f: seen.append((label, f)))
    assert seen and all(label.startswith("planning romer:offline,passes=1 on romer95, pass ") for label, _ in seen)
    assert seen[-1][1] > 0.99 and all(0 <= f <= 1 for _, f in seen)

    def stop(label, f):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        _core.Simulation(zipf, [("romer95", "romer:offline,passes=1")], progress=stop)


def test_offline_plans_from_the_python_api(zipf):
    off, online = sp.compare(zipf, ["romer95"], ["romer:offline,passes=2", "romer:approx-online"], progress=False)
    assert 1 <= off["policy.romer.offline.passes"] <= 2
    assert off["policy.romer.offline.planned"] == sum(v for k, v in off.counters.items() if k.startswith("policy.romer.promoted."))
    # OFFLINE's superpages exist from the start and pay no bookkeeping: fewer TLB-service cycles.
    cost = lambda r: r["cycles.walk"] + r["cycles.bookkeeping"] + r["cycles.copy"]
    assert cost(off) < cost(online)


@pytest.mark.parametrize("spec,words", [
    ("romer", ["needs a variant", "approx-online"]),
    ("romer:often", ["unknown variant 'often'", "fixed, asap, asap-4-64, approx-online, online, offline"]),
    ("romer:asap-4-64,sizes=1MiB", ["64KiB pages only"]),
])
def test_bad_policies_say_what_is_valid(cli, zipf, spec, words):
    rc, out, err = cli("simulate", zipf, "--machine", "romer95", "--policy", spec)
    assert rc != 0
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err
    for w in words:
        assert w in line, line
