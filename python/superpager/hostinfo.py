"""What machine a benchmark ran on, for its report's first line.

The development VMs are not one machine: on different days the same build ran on an Intel Xeon
and on an AMD EPYC host, and its speed moved by up to 3x between them (docs/PERFORMANCE.md).
A rate without the CPU it was measured on cannot be compared with another day's.
"""
from __future__ import annotations

import os
import platform


def _cpu(cpuinfo: str) -> tuple[str, str]:
    """(model name, "family F, model M" or ""), from the first processor's block of cpuinfo."""
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo) as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    fam = f"family {fields['cpu family']}, model {fields['model']}" if "cpu family" in fields and "model" in fields else ""
    return name, fam


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name from /proc/cpuinfo (what `lscpu` prints), with its family and model
    where cpuinfo gives them, or what Python knows. A VM's name is often just "AMD EPYC", which
    hides the generation (family 23: Zen and Zen 2; 25: Zen 3 and 4; 26: Zen 5)."""
    name, fam = _cpu(cpuinfo)
    return f"{name} ({fam})" if fam else name


def machine_line(cpuinfo: str = "/proc/cpuinfo") -> str:
    """e.g. "AMD EPYC (family 26, model 2; 2 CPUs)": the CPU and how many CPUs this process may use."""
    name, fam = _cpu(cpuinfo)
    return f"{name} ({fam + '; ' if fam else ''}{os.cpu_count()} CPUs)"
