"""superpager: superpage (huge page) management systems to study, compare and use.

The simulator core is Rust (superpager._core); this package holds the API and the CLI.
"""
from ._core import (
    ConfigError,
    FileAccessError,
    SimulationError,
    SuperpagerError,
    TraceError,
    UsageError,
    __version__,
)
from .api import (
    Result,
    ResultSet,
    compare,
    dirty_file,
    fragmentation,
    gen,
    machines,
    mrc,
    policies,
    run,
    scenarios,
    shared_file,
    simulate,
    strided_preemption,
    simulate_scenario,
    trace_import,
    trace_info,
    write_results,
)
from .store import query as results_query
from .store import results

__all__ = [
    "SuperpagerError",
    "TraceError",
    "ConfigError",
    "FileAccessError",
    "UsageError",
    "SimulationError",
    "__version__",
    "Result",
    "ResultSet",
    "compare",
    "dirty_file",
    "fragmentation",
    "gen",
    "machines",
    "mrc",
    "policies",
    "run",
    "scenarios",
    "shared_file",
    "simulate",
    "simulate_scenario",
    "strided_preemption",
    "trace_import",
    "trace_info",
    "write_results",
    "results",
    "results_query",
]
