"""The live face's subcommands: inspect, run, attach, restore (docs/LIVE.md)."""
from __future__ import annotations

import argparse
import json
import sys

EPILOG_INSPECT = """examples:
  superpager inspect $(pgrep -n python3)
  superpager inspect 1234 --json > p.json
  superpager inspect 1234 --html map.html --png map.png
  superpager inspect 1234 --all --bloat-samples 32

what it reads: /proc/PID/smaps (the kernel's accounting), /proc/PID/pagemap (frames: root only),
/proc/kpageflags (folio sizes, the zero page: root only) and /proc/PID/mem (bloat samples, read
only). Without root it says what it cannot see and shows the rest.
"""

EPILOG_RUN = """examples:
  superpager run --policy base -- ./gups 4096
  superpager run --policy thp --report out/thp -- ./gups 4096
  superpager run --policy navarro-live:promote_at=256 --report out/nl -- ./gups 4096
  superpager run --policy thp --sysfs transparent_hugepage/hugepages-64kB/enabled=madvise -- ./prog
  superpager run --policy hugetlb-1g:reserve=4 -- ./prog        (root: reserves four 1GB pages)

policies:
{policies}

The report (--report DIR): report.md, report.json (wall time, exit status, notes, the policy's
decisions and failures by reason, the shim's counters, its own CPU time) and timeseries.csv
(RSS and huge-page bytes every --sample-ms). Every kernel setting changed for the run is put
back on exit, Ctrl-C, SIGTERM and, after a crash of superpager, by `superpager restore`.
"""

EPILOG_ATTACH = """examples:
  superpager attach 1234 --policy navarro-live
  superpager attach 1234 --policy navarro-live:max_cpu=0.1 --duration 60 --report out/
  superpager attach 1234 --policy damon-live

Only navarro-live and damon-live act on a running process (base, thp and hugetlb-1g act when it
starts: use `run`). Needs root (MADV_COLLAPSE on another process needs CAP_SYS_NICE and ptrace
access). Ctrl-C detaches and leaves the process running.
"""


EPILOG_RESTORE = """examples:
  superpager restore                            # as the user (root) whose run was killed
  SUPERPAGER_STATE=/some/dir superpager restore # records kept elsewhere

`run` and `attach` write the old value of every setting they change to a restore record before
changing it, and put it back when they end. A superpager killed before it could (SIGKILL, a
crash, a power cut of the VM aside: /run is cleared at boot, as the settings are) leaves its
record; this command, and the start of every inspect, run and attach, restores the records whose
owner is no longer running. Exit status 1 if a value could not be written back.
"""


def _pid(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not a process id") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"'{s}' is not a process id")
    return v


def _kv(s: str) -> tuple[str, str]:
    k, eq, v = s.partition("=")
    if not eq or not k or not v:
        raise argparse.ArgumentTypeError(f"'{s}' is not KEY=VALUE (a path under /sys/kernel/mm, then its value)")
    return k, v


def cmd_inspect(a) -> int:
    from . import live
    try:
        r = live.inspect(a.pid, a.bloat_samples, a.seed)
    except ProcessLookupError:
        print(f"superpager: error: inspect: no process {a.pid}", file=sys.stderr)
        return 2
    except PermissionError as e:
        print(f"superpager: error: inspect: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(r, indent=1, sort_keys=True))
    else:
        print(live.render_text(r, all_vmas=a.all))
    if a.html:
        live.write_html(r, a.html)
        print(f"wrote {a.html}", file=sys.stderr)
    if a.png:
        live.write_png(r, a.png)
        print(f"wrote {a.png}", file=sys.stderr)
    return 0


def _finish(rep, a) -> int:
    from . import live
    if a.json:
        print(json.dumps(rep.to_json(), indent=1, sort_keys=True))
    else:
        print(live.summary(rep), file=sys.stderr)
    if a.report:
        print(f"report in {a.report}/report.md", file=sys.stderr)
    return 0 if rep.settings_restored else 1


def cmd_run(a) -> int:
    from . import live
    from .live.run import Interrupted
    cmd = list(a.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    try:
        rep = live.run(cmd, a.policy, a.report, a.sysfs, a.sample_ms, a.inspect_every, a.quiet)
    except (live.LiveError, ValueError) as e:
        print(f"superpager: error: {e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Interrupted):
        print("superpager: interrupted; the program was stopped and every setting restored", file=sys.stderr)
        return 130
    if _finish(rep, a) != 0:
        return 1  # a kernel setting could not be put back: the report's notes say which
    # Like `time` and `env`: the program's own exit status (128+N when a signal N ended it).
    st = rep.exit_status or 0
    return st if st >= 0 else 128 - st


def cmd_attach(a) -> int:
    from . import live
    try:
        rep = live.attach(a.pid, a.policy, a.duration, a.report, a.sample_ms, a.inspect_every, a.quiet)
    except (live.LiveError, ValueError) as e:
        print(f"superpager: error: {e}", file=sys.stderr)
        return 2
    return _finish(rep, a)


def cmd_restore(a) -> int:
    from . import live
    lines = live.restore_stale()
    for line in lines:
        print(line)
    if not lines:
        print("nothing to restore: no setting is left changed by a superpager that stopped")
    return 1 if any("could not" in line or "unreadable" in line for line in lines) else 0


def add_parsers(sub, raw) -> None:
    from .live.policies import describe
    i = sub.add_parser("inspect", help="a running process's page sizes, bloat and physical contiguity", epilog=EPILOG_INSPECT, formatter_class=raw)
    i.add_argument("pid", type=_pid, help="the process id")
    i.add_argument("--json", action="store_true", help="print the whole report as JSON")
    i.add_argument("--html", metavar="FILE", help="write an HTML page with a map of the address space coloured by mapping size")
    i.add_argument("--png", metavar="FILE", help="write the map as a PNG image")
    i.add_argument("--all", action="store_true", help="list every VMA (default: those with 1MiB or more resident)")
    i.add_argument("--bloat-samples", type=int, default=8, metavar="N", help="4KB pieces read per huge page to estimate bloat (0: none; default 8)")
    i.add_argument("--seed", type=int, default=1, help="seed of the sampled pieces (default 1)")
    i.set_defaults(fn=cmd_inspect)

    r = sub.add_parser("run", help="run a program under a live superpage policy and report what it did",
                       epilog=EPILOG_RUN.format(policies=describe()), formatter_class=raw)
    r.add_argument("--policy", required=True, help="base, thp, navarro-live[:k=v,...], damon-live[:k=v,...] or hugetlb-1g[:k=v,...]")
    _common(r)
    r.add_argument("--sysfs", type=_kv, action="append", default=[], metavar="KEY=VALUE",
                   help="set a setting under /sys/kernel/mm for the run, restored after (repeatable; root)")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- then the program and its arguments")
    r.set_defaults(fn=cmd_run)

    t = sub.add_parser("attach", help="apply a live policy to a running process", epilog=EPILOG_ATTACH, formatter_class=raw)
    t.add_argument("pid", type=_pid, help="the process id")
    t.add_argument("--policy", required=True, help="navarro-live[:k=v,...] or damon-live[:k=v,...]")
    t.add_argument("--duration", type=float, default=None, metavar="SECONDS", help="detach after this long (default: until the process exits or Ctrl-C)")
    _common(t)
    t.set_defaults(fn=cmd_attach)

    s = sub.add_parser("restore", help="put back kernel settings left changed by a superpager run that crashed", epilog=EPILOG_RESTORE, formatter_class=raw)
    s.set_defaults(fn=cmd_restore)


def _common(p) -> None:
    p.add_argument("--report", metavar="DIR", help="write report.md, report.json and timeseries.csv here")
    p.add_argument("--sample-ms", type=int, default=100, metavar="MS", help="sample RSS and huge-page bytes this often (default 100)")
    p.add_argument("--inspect-every", type=float, default=0.0, metavar="SECONDS",
                   help="inspect the whole process this often for bloat and contiguity (default 0: never; costs a pagemap scan)")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no status line")
