# Times one command the way every bench script here does (shared by
# bench/isolation-peers.sh and bench/gpu-start.sh, so their rows compare):
#   BENCH_TIME_RUNS=N BENCH_TIME_WARMUP=W [BENCH_TIME_PAUSE_MS=P] \
#     python3 bench/lib/timeruns.py LABEL CMD...
# Wall time from spawn to exit (time.perf_counter() around subprocess.run,
# stdio to /dev/null) after W untimed warm-up runs, whose stderr names the
# reason when the command cannot run at all. With P > 0 the harness sleeps
# P ms (untimed) before each timed run: a start on an idle machine rather
# than one right after the last. "{i}" in CMD becomes a unique
# run tag (container ids). median = sorted[n/2], p90 = sorted[n*9/10].
# Prints one line: "LABEL<TAB>ok<TAB>median_ms<TAB>p90_ms" or
# "LABEL<TAB>failed<TAB>reason".
import os, signal, subprocess, sys, time

label, argv = sys.argv[1], sys.argv[2:]
runs, warmup = int(os.environ["BENCH_TIME_RUNS"]), int(os.environ["BENCH_TIME_WARMUP"])
pause_s = float(os.environ.get("BENCH_TIME_PAUSE_MS", "0")) / 1000
TIMEOUT_S = 30

# Hung-run guard. Not subprocess.run(timeout=...): with a timeout, Popen.wait
# polls with growing sleeps, which adds up to ~1 ms per run and quantizes
# the times. SIGALRM interrupts the blocking waitpid instead, and
# subprocess.run kills the child when the handler raises.
class Hung(Exception):
    pass

def on_alarm(signum, frame):
    raise Hung(f"no exit within {TIMEOUT_S} s")

signal.signal(signal.SIGALRM, on_alarm)

def cmd(tag):
    return [a.replace("{i}", f"{os.getpid()}-{tag}") for a in argv]

def fail(reason):
    print(f"{label}\tfailed\t{reason[:220]}")
    sys.exit(0)

# Untimed warm-up runs (page cache, first-use setup); their stderr names
# the reason if the command cannot run at all.
for w in range(warmup):
    try:
        p = subprocess.run(cmd(f"w{w}"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as e:
        fail(str(e))
    if p.returncode != 0:
        lines = [l.strip() for l in p.stderr.decode(errors="replace").splitlines() if l.strip()]
        fail(lines[-1] if lines else f"exit status {p.returncode}")

times = []
for i in range(runs):
    c = cmd(i)
    if pause_s > 0:
        time.sleep(pause_s)
    signal.alarm(TIMEOUT_S)
    try:
        t = time.perf_counter()
        rc = subprocess.run(c, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        d = time.perf_counter() - t
    except (OSError, Hung) as e:
        fail(f"run {i}: {e}")
    finally:
        signal.alarm(0)
    if rc != 0:
        fail(f"run {i}: exit status {rc}")
    times.append(d)
times.sort()
print(f"{label}\tok\t{times[len(times) // 2] * 1000:.2f}\t{times[len(times) * 9 // 10] * 1000:.2f}")
