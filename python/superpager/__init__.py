"""superpager: superpage (huge page) management systems to study, compare and use.

The simulator core is Rust (superpager._core); this package holds the API and the CLI.
"""
from ._core import SuperpagerError, __version__
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

__all__ = [
    "SuperpagerError",
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
]
