"""A small progress bar on stderr: shown only on a terminal, and only once work has run for
over a second (so quick commands stay quiet and scripts get clean output)."""
from __future__ import annotations
import sys
import time


class Progress:
    def __init__(self, label: str, enabled: bool | None = None, delay: float = 1.0):
        self.label = label
        self.start = time.monotonic()
        self.delay = delay
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.shown = False
        self.last = 0.0

    def update(self, fraction: float) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        elapsed = now - self.start
        if elapsed < self.delay or now - self.last < 0.1:
            return
        self.last = now
        self.shown = True
        f = min(max(fraction, 0.0), 1.0)
        width = 30
        fill = int(f * width)
        eta = (elapsed / f - elapsed) if f > 0.001 else 0.0
        sys.stderr.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {f * 100:5.1f}% {elapsed:6.1f}s eta {eta:5.1f}s ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 90 + "\r")
            sys.stderr.flush()
