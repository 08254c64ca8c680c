"""The results store (superpager.store, `superpager results`, --db on simulate and compare)."""
import json
import os
import shutil

import pytest

import superpager as sp
from superpager import store as st

pytest.importorskip("duckdb", reason="the results store needs duckdb (make setup installs it)")


@pytest.fixture
def small(tmp_path):
    p = str(tmp_path / "g.spt")
    sp.gen("gups", p, size="64MiB", accesses=50_000, progress=False)
    return p


def test_a_stored_run_comes_back_exactly_and_is_found_by_content(tmp_path, small):
    r = sp.simulate(small, policy="linux-thp", sample_every=10_000, map_every=20_000, map_region="2MiB", progress=False)
    db_path = str(tmp_path / "r.duckdb")
    with st.Store(db_path) as db:
        key = db.key(small, "skylake", "linux-thp", "64GiB", sample_every=10_000)
        assert db.get(key) is None
        db.put(key, r, 0.5)
        back = db.get(key)
        assert back.to_dict() == r.to_dict()
        assert len(back.map["frames"]) == len(r.map["frames"]) > 1
        # The same content under another name is the same run; other content is not.
        copy = str(tmp_path / "copy.spt")
        shutil.copy(small, copy)
        assert db.key(copy, "skylake", "linux-thp", "64GiB", sample_every=10_000).run_id == key.run_id
        with open(copy, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            b = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([b[0] ^ 1]))
        assert db.key(copy, "skylake", "linux-thp", "64GiB", sample_every=10_000).run_id != key.run_id
        # Options and policies are part of the key.
        assert db.key(small, "skylake", "linux-thp", "64GiB", sample_every=20_000).run_id != key.run_id
        assert db.key(small, "skylake", "base", "64GiB", sample_every=10_000).run_id != key.run_id
        row = db.query("SELECT walks, accesses, policy FROM runs").iloc[0]
        assert (row.walks, row.accesses, row.policy) == (r["walks"], r["accesses"], "linux-thp")
        n = db.query(f"SELECT count(*) AS n FROM counters WHERE run_id = '{key.run_id}'").n[0]
        assert n == len(r.counters)


def test_simulate_db_reuses_a_stored_run_unless_forced(cli, tmp_path, small):
    args = ["simulate", small, "--policy", "navarro", "--db", "r.duckdb", "--json"]
    s, out1, err1 = cli(*args, check=True)
    assert "already" not in err1
    s, out2, err2 = cli(*args, check=True)
    assert "is in r.duckdb already" in err2
    assert json.loads(out1) == json.loads(out2)
    s, out3, err3 = cli(*args, "--force", check=True)
    assert "already" not in err3
    s, out, _ = cli("results", "query", "SELECT count(*) AS n FROM runs", "--db", "r.duckdb", "--json", check=True)
    assert json.loads(out) == [{"n": 1}]


def test_compare_db_runs_only_what_the_store_lacks(cli, tmp_path, small):
    cli("simulate", small, "--policy", "base", "--db", "r.duckdb", check=True)
    s, out, err = cli("compare", small, "--machines", "skylake,zen3", "--policies", "base,fixed:2MiB", "--db", "r.duckdb", "--json", check=True)
    assert "1 of 4 runs are in r.duckdb already" in err
    rs = json.loads(out)
    assert [(r["machine"], r["policy"]) for r in rs] == [("skylake", "base"), ("skylake", "fixed:2MiB"), ("zen3", "base"), ("zen3", "fixed:2MiB")]
    fresh = sp.compare(small, machines=["skylake", "zen3"], policies=["base", "fixed:2MiB"], progress=False)
    assert [r["counters"] for r in rs] == [r.counters for r in fresh]


def test_results_cli_and_python_api_agree(cli, tmp_path, small):
    cli("compare", small, "--policies", "base,fixed:2MiB,linux-thp", "--db", "r.duckdb", check=True)
    sql = "SELECT policy, avg(walks) AS walks FROM runs GROUP BY policy ORDER BY policy"
    s, out, _ = cli("results", "query", sql, "--db", "r.duckdb", "--json", check=True)
    df = sp.results(db=str(tmp_path / "r.duckdb"), sql=sql)
    assert json.loads(out) == json.loads(df.to_json(orient="records"))
    assert list(df.policy) == ["base", "fixed:2MiB", "linux-thp"]
    runs = sp.results(db=str(tmp_path / "r.duckdb"), where="policy = 'base'")
    assert len(runs) == 1 and runs.walks[0] == df.walks[0]
    s, out, _ = cli("results", "list", "--db", "r.duckdb", check=True)
    assert "3 runs in r.duckdb" in out
    rid = runs.run_id[0]
    s, out, _ = cli("results", "show", rid[:6], "--db", "r.duckdb", "--json", check=True)
    assert json.loads(out)["policy"] == "base"
    s, out, _ = cli("results", "export", "pq", "--db", "r.duckdb", check=True)
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "pq" / "runs.parquet").num_rows == 3
    assert pq.read_table(tmp_path / "pq" / "counters.parquet").num_rows == int(sp.results(db=str(tmp_path / "r.duckdb"), sql="SELECT count(*) AS n FROM counters").n[0])


@pytest.mark.parametrize("args, msg", [
    (["results", "list", "--db", "missing.duckdb"], "missing.duckdb: no such results store"),
    (["results", "query", "SELEC 1", "--db", "r.duckdb"], "r.duckdb: query failed: Parser Error"),
    (["results", "show", "zz", "--db", "r.duckdb"], "'zz' is not a run id"),
    (["results", "show", "0000", "--db", "r.duckdb"], "r.duckdb: no run with id 0000"),
    (["results", "list", "--db", "notadb.duckdb"], "notadb.duckdb: "),
])
def test_bad_store_input_is_one_line(cli, tmp_path, small, args, msg):
    cli("simulate", small, "--db", "r.duckdb", check=True)
    (tmp_path / "notadb.duckdb").write_text("hello\n")
    s, out, err = cli(*args)
    assert s == 2, err
    assert err.count("\n") == 1 and msg in err, err
    assert "Traceback" not in err


def test_a_store_of_another_schema_is_refused(tmp_path):
    import duckdb

    p = str(tmp_path / "old.duckdb")
    c = duckdb.connect(p)
    c.execute("CREATE TABLE meta (key VARCHAR, value VARCHAR); INSERT INTO meta VALUES ('schema_version', '99')")
    c.close()
    with pytest.raises(sp.SuperpagerError, match="schema version 99"):
        st.Store(p)
