"""superpager's live face: inspect a real process's superpages, and apply the policies to real
Linux processes (docs/LIVE.md).

    superpager inspect PID [--json] [--html FILE] [--png FILE]
    superpager run --policy navarro-live --report out/ -- ./program args
    superpager attach PID --policy navarro-live --duration 60
"""
from .inspect import inspect, render_text, write_html, write_png
from .policies import POLICIES, parse_policy
from .run import LiveError, Report, attach, run, summary
from .sysfs import SysfsChanges, restore_stale

__all__ = ["inspect", "render_text", "write_html", "write_png", "POLICIES", "parse_policy", "LiveError", "Report",
           "attach", "run", "summary", "SysfsChanges", "restore_stale"]
