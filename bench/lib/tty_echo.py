#!/usr/bin/env python3
"""Keystroke round trip through a terminal: runs CMD on a pseudo-terminal
of its own (as a user's terminal emulator would), waits for READY, then
writes one byte at a time to the terminal's master and times until the
byte comes back (its echo). CMD must echo what it reads, one byte at a
time (`stty raw -echo; exec cat` does, as a shell's line editor does).

    tty_echo.py [--keys N] [--warmup W] [--gap-ms G] -- CMD ARGS...

Prints one JSON object: samples, p50/p90/p99/max/mean in milliseconds.
"""

import argparse
import json
import os
import pty
import select
import signal
import statistics
import sys
import time


def read_until(fd, needle, deadline):
    """Reads from fd until `needle` has been seen; returns what was read."""
    seen = b""
    while needle not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{needle!r} not seen; got {seen[-200:]!r}")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise EOFError(f"terminal closed before {needle!r}; got {seen[-200:]!r}")
            seen += chunk
    return seen


def percentile(sorted_ms, q):
    i = min(len(sorted_ms) - 1, max(0, round(q * (len(sorted_ms) - 1))))
    return sorted_ms[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("a command to run on the terminal is required after --")

    pid, master = pty.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    try:
        read_until(master, b"READY", time.monotonic() + 30)
        samples = []
        for i in range(a.warmup + a.keys):
            key = bytes([ord("a") + i % 26])
            t0 = time.perf_counter_ns()
            os.write(master, key)
            read_until(master, key, time.monotonic() + 10)
            t1 = time.perf_counter_ns()
            if i >= a.warmup:
                samples.append((t1 - t0) / 1e6)
            time.sleep(a.gap_ms / 1000)
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    s = sorted(samples)
    print(
        json.dumps(
            {
                "samples": len(s),
                "p50_ms": round(statistics.median(s), 3),
                "p90_ms": round(percentile(s, 0.90), 3),
                "p99_ms": round(percentile(s, 0.99), 3),
                "max_ms": round(s[-1], 3),
                "mean_ms": round(statistics.fmean(s), 3),
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
