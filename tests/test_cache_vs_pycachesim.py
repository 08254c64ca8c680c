"""The data-cache model (mmu/cache.rs) against pycachesim, an independent cache simulator, set up
as the same hierarchy: LRU levels, each miss loading from the next (`load_from`), loads only.
Per level, the references it served must agree exactly on random and strided streams."""

import random

import pytest

from superpager import _core

cachesim = pytest.importorskip("cachesim", reason="pycachesim is not installed (pip install pycachesim)")

HIERARCHIES = [
    [(32 << 10, 8)],
    [(32 << 10, 8), (256 << 10, 4)],
    [(48 << 10, 12), (2 << 20, 16), (8 << 20, 16)],
    [(4 << 10, 64), (64 << 10, 4), (1 << 20, 16)],  # a fully associative first level
]


def pycachesim_served(levels, line, addrs):
    from cachesim import Cache, CacheSimulator, MainMemory

    mem = MainMemory()
    caches: list = []
    for i, (b, w) in reversed(list(enumerate(levels))):  # each level loads from the one below
        caches.insert(0, Cache(f"L{i + 1}", b // line // w, w, line, "LRU", load_from=caches[0] if caches else None))
    mem.load_to(caches[-1])
    mem.store_from(caches[-1])
    sim = CacheSimulator(caches[0], mem)
    for a in addrs:
        sim.load(a, 1)
    hits = [c.backend.HIT_count for c in caches]
    return hits + [caches[-1].backend.MISS_count]


def streams(seed):
    rnd = random.Random(seed)
    yield "random", [rnd.randrange(0, 64 << 20) for _ in range(60_000)]
    yield "random-small", [rnd.randrange(0, 3 << 20) for _ in range(60_000)]
    for stride in (64, 4096, 4160, 1 << 20):
        yield f"stride-{stride}", [(i * stride) % (96 << 20) for i in range(40_000)]


@pytest.mark.parametrize("levels", HIERARCHIES, ids=lambda h: "+".join(f"{b >> 10}K/{w}" for b, w in h))
def test_served_per_level_matches_pycachesim(levels):
    for name, addrs in streams(7):
        ours = _core.cache_served(levels, 64, addrs)
        theirs = pycachesim_served(levels, 64, addrs)
        assert ours == theirs, (name, ours, theirs)
        assert sum(ours) == len(addrs)


def test_bad_geometry_is_refused():
    with pytest.raises(_core.UsageError):
        _core.cache_served([(1024, 3)], 64, [0])


def test_no_levels_or_more_than_four_is_refused_with_the_count():
    # A machine file has 1 to 4 levels (mmu/cache.rs MAX_LEVELS); so does this entry point.
    with pytest.raises(_core.UsageError, match="1 to 4 levels, not 5"):
        _core.cache_served([(1024, 2)] * 5, 64, [0])
    with pytest.raises(_core.UsageError, match="not 0"):
        _core.cache_served([], 64, [0])
    assert _core.cache_served([(1024, 2)] * 4, 64, [0, 0]) == [1, 0, 0, 0, 1]
