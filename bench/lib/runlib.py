# What bench/lib/timeruns.py and bench/lib/interleave.py share: one untimed
# warm-up check and one timed run of a command, the same way for every
# benchmark here: wall time from spawn to exit (time.perf_counter() around
# subprocess.run, stdio to /dev/null), with a guard against a hung run.
import signal, subprocess, time

TIMEOUT_S = 30


class Hung(Exception):
    pass


def _on_alarm(signum, frame):
    raise Hung(f"no exit within {TIMEOUT_S} s")


# Hung-run guard. Not subprocess.run(timeout=...): with a timeout, Popen.wait
# polls with growing sleeps, which adds up to ~1 ms per run and quantizes
# the times. SIGALRM interrupts the blocking waitpid instead, and
# subprocess.run kills the child when the handler raises.
signal.signal(signal.SIGALRM, _on_alarm)


def warm_up(argv):
    """One untimed run: None if it succeeded, else why not (the last line
    of its stderr, or its exit status)."""
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if p.returncode != 0:
        lines = [l.strip() for l in p.stderr.decode(errors="replace").splitlines() if l.strip()]
        return lines[-1] if lines else f"exit status {p.returncode}"
    return None


def timed(argv):
    """Milliseconds from spawn to exit; raises OSError, Hung, or RuntimeError
    (a non-zero exit status)."""
    signal.alarm(TIMEOUT_S)
    try:
        t = time.perf_counter()
        rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        d = time.perf_counter() - t
    finally:
        signal.alarm(0)
    if rc != 0:
        raise RuntimeError(f"exit status {rc}")
    return d * 1000
