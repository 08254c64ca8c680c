"""What machine a benchmark ran on, for its report's first line.

The development VMs are not one machine: on different days the same build ran on an Intel Xeon
and on an AMD EPYC host, and its speed moved by up to 3x between them (docs/PERFORMANCE.md).
A rate without the CPU it was measured on cannot be compared with another day's.
"""
from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (what `lscpu` prints), or what Python knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_line() -> str:
    """e.g. "AMD EPYC (2 CPUs)": the CPU model and how many CPUs this process may use."""
    return f"{cpu_model()} ({os.cpu_count()} CPUs)"
