"""bench --live and bench --model run our programs through one helper (`run_program`): the
program's `key=value` words come back as a dict, and a program that fails stops the bench with a
line naming the bench, what ran, the policy and the end of its output."""

import pytest

from superpager.bench_live import key_values, run_program


def test_key_values_reads_every_word_with_an_equals_sign():
    assert key_values("model_access rand access_s=0.25 checksum=0x1f\nrss_bytes=4096 note") == {
        "access_s": "0.25", "checksum": "0x1f", "rss_bytes": "4096"}


def test_a_program_that_succeeds_gives_its_words():
    rep, kv = run_program(["sh", "-c", "echo access_s=0.5 populate_s=0.1"], "base", "bench --model")
    assert rep.exit_status == 0
    assert kv == {"access_s": "0.5", "populate_s": "0.1"}


def test_a_program_that_fails_names_the_bench_what_ran_and_its_last_output():
    with pytest.raises(RuntimeError, match=r"^bench --model: gups 64MiB under base exited with 3: half=1$"):
        run_program(["sh", "-c", "echo half=1; exit 3"], "base", "bench --model", "gups 64MiB")
    with pytest.raises(RuntimeError, match=r"^bench --live: sh -c exit 2 under base exited with 2: $"):
        run_program(["sh", "-c", "exit 2"], "base", "bench --live")
