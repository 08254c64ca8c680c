"""Typed stubs for the Rust extension (crates/py). Everything here is implemented in Rust."""
from collections.abc import Callable

__version__: str

class SuperpagerError(Exception):
    """Bad input, configuration or simulation state; the message is one line naming where."""

class TraceError(SuperpagerError):
    """A trace file is malformed; the message names the file and byte offset."""

class ConfigError(SuperpagerError):
    """A machine, policy or scenario file is wrong; the message names the file and key."""

class FileAccessError(SuperpagerError):
    """A file could not be read or written (the operating system's reason)."""

class UsageError(SuperpagerError):
    """A request that cannot be carried out: an unknown name, a bad parameter."""

class SimulationError(SuperpagerError):
    """The simulated system cannot go on (out of simulated memory, a broken invariant)."""

def machines() -> list[tuple[str, str, str]]: ...
def machine_info(spec: str) -> dict: ...
def policies() -> list[tuple[str, str, str]]: ...
def check_policy(policy: str, machine: str) -> str: ...
def policy_passes(policy: str, machine: str) -> int:
    """Passes over the trace a run makes at most: 1 plus its planning passes (romer:offline)."""
def gen_kinds() -> list[tuple[str, str]]: ...
def check_output(path: str, inputs: list[str] = ...) -> None:
    """Raise SuperpagerError if `path` exists and is not a regular file, or is one of `inputs`."""
def gen(
    kind: str,
    out: str,
    size: str = "64MiB",
    accesses: int = 0,
    seed: int = 1,
    stride: str = "4KiB",
    elem: int = 8,
    alpha: float = 0.99,
    base: int = 0x7F0000000000,
    passes: int = 1,
    progress: Callable[[float], None] | None = None,
    warm: bool = False,
    collapse: str = "page",
) -> dict:
    """`collapse`: runs join within a 4KiB page ("page") or a 64-byte line ("line")."""
def trace_import(src: str, fmt: str, out: str, fetches: bool = True, collapse: str = "page",
                 progress: Callable[[float], None] | None = None) -> dict:
    """`collapse`: runs join within a 4KiB page ("page"), a 64-byte line ("line"), or not at all ("none")."""
def trace_join(inputs: list[str], out: str, progress: Callable[[float], None] | None = None) -> dict: ...
def replacements() -> list[tuple[str, str, str]]: ...
def trace_merge(inputs: list[str], out: str, slice: int = 10000, quantum: int | None = None, progress: Callable[[float], None] | None = None) -> dict: ...
def trace_totals(path: str) -> tuple[int, int] | None:
    """(records, accesses) from the trace's index alone; None when it has no index."""
def trace_info(path: str, page_sizes: list[str] = ..., allow_truncated: bool = False,
               progress: Callable[[float], None] | None = None) -> dict: ...
def mrc(path: str, page_size: str = "4KiB", max_entries: int = 1536, stream: str = "all",
        progress: Callable[[float], None] | None = None) -> tuple[int, int, list[int]]: ...
def read_addresses(path: str, limit: int = 0, data_only: bool = False) -> bytes: ...
def tlb_only(addresses: bytes, entries: int = 64, ways: int = 4, page_size: str = "4KiB") -> tuple[int, int, float]: ...
def wide_tlb() -> bool: ...
def fragmentation_experiment(machine: str, policy: str, memory: str, program: str, runs: int = 4, seed: int = 1,
                             wired: int = 0, web_files: int = 20000, web_min: str = "4KiB", web_max: str = "64KiB",
                             web_requests: int = 100000, web_alpha: float = 0.8, sample_every: int = 1000000,
                             validate: bool = False,
                             progress: Callable[[str, float], None] | None = None) -> str:
    """Navarro et al.'s Figs. 4-5 sequence: wired pages, a web server, `program` run `runs` times, the
    web server again. Returns JSON: {machine, policy, memory, largest_size, phases: [{label, start_ms,
    end_ms, page_ins, walks, accesses, promotions, largest_pages_peak, contiguity_end}], series:
    [[ms, contiguity, label]], counters}."""
def strided_preemption(machine: str, policy: str, memory: str, free_extents: int, stride: str, touches: int, free_memory: str = "extents") -> str:
    """The strided-preemption adversary; `free_memory` is "extents" or "scattered". JSON: {policy,
    free_extents, free_memory, touches, faults, faults_preempting, reservations, reservations_failed,
    preemptions, dissolved_for_frames, cycles, counters}."""
def dirty_file(machine: str, policy: str, memory: str, file_size: str, every: int) -> str:
    """The dirty-file adversary. JSON: {policy, file_bytes, every, pages_written, superpages, dirty_pages,
    flush_bytes, cycles, flush_cycles, walks, counters}."""
def shared_file(machine: str, policy: str, memory: str, file_size: str, processes: int, passes: int) -> str:
    """Aligned placement of file mappings. JSON: {policy, processes, trace_addresses, placed_addresses,
    walks, walks_after_first_pass, superpages, counters}."""

class Simulation:
    def __init__(
        self,
        trace: str,
        runs: list[tuple[str, str]],
        memory: str = "64GiB",
        sample_every: int = 1 << 20,
        allow_truncated: bool = False,
        validate: bool = False,
        swap: str = "0",
        replacement: str = "clock",
        progress: Callable[[str, float], None] | None = None,
        bloat: bool = False,
        map_every: int = 0,
        map_region: str | None = None,
    ) -> None:
        """Open the trace and set up every run. `progress(label, fraction)` hears about work done
        before the first chunk can run (Romer et al.'s OFFLINE planning passes)."""
    def step(self, chunks: int = 4) -> bool: ...
    def progress(self) -> float: ...
    def truncated(self) -> bool: ...
    def busy_seconds(self) -> list[float]:
        """Seconds each run's engine has spent on the trace (its share of the shared pass)."""
    def results_json(self) -> list[str]: ...

class ScenarioRun:
    """A scenario (TOML) on one machine under one policy: prelude, then its processes."""
    def __init__(
        self,
        scenario: str,
        machine: str | None = None,
        policy: str | None = None,
        sample_every: int | None = None,
        validate: bool = False,
        progress: Callable[[str, float], None] | None = None,
        bloat: bool = False,
        map_every: int = 0,
        map_region: str | None = None,
    ) -> None: ...
    def step(self, chunks: int = 4) -> bool: ...
    def progress(self) -> float: ...
    @property
    def machine(self) -> str: ...
    @property
    def policy(self) -> str: ...
    def results_json(self) -> str: ...

class TraceDumper:
    def __init__(self, path: str, allow_truncated: bool = False) -> None: ...
    def header(self) -> str: ...
    def lines(self, n: int) -> list[str]: ...

class CaptureSession:
    """The receiving end of a capture: reads the qemu plugin's packets from the SOCK_SEQPACKET
    socket `fd` on a thread of its own and writes the .spt trace `out`. Runs collapse within a
    4KiB page (`collapse` "page", the default) or a 64-byte cache line ("line")."""
    def __init__(self, fd: int, out: str, root_pid: int, meta: str, collapse: str = "page") -> None: ...
    def progress(self) -> tuple[int, int, int, bool, bool]:
        """(accesses, packets, bytes received, receiving finished, writing failed)"""
    def stop(self) -> None: ...
    def finish(self, interrupted: bool = False) -> dict:
        """End the trace: {records, accesses, chunks, bytes, processes, threads, packets, orphans,
        truncated, write_error, stream_error, endings: [{pid, host_pid, end, code|program}]}"""

# The live face (crates/live, bindings in crates/py/src/live.rs): JSON reports, decoded by
# superpager.live.
def live_inspect(pid: int, bloat_samples: int = 8, seed: int = 1) -> str: ...
def live_rank(pid: int, regions: list[tuple[int, int, int]]) -> list[tuple[int, int]]: ...
class LiveCollapser:
    def __init__(self, pid: int, reserve: str = "auto") -> None: ...
    def collapse(self, addr: int) -> tuple[bool, str, int]: ...
    def reserve_counters(self) -> str: ...

class NavarroLive:
    def __init__(self, pid: int, promote_at: int = 512, reserve: str = "auto") -> None: ...
    def step(self, max_collapses: int) -> str: ...
    def counters(self) -> str: ...
def host_explain() -> tuple[list[tuple[str, str, str]], list[str]]: ...
def preset_toml(name: str) -> str | None: ...
def calibrated_host_toml(input_json: str) -> str: ...
def host_cache_levels() -> list[tuple[str, int, int]]: ...
def cache_served(levels: list[tuple[int, int]], line: int, addrs: list[int]) -> list[int]: ...
