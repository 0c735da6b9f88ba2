# Times one command the way every bench script here does (shared by
# bench/isolation-peers.sh and bench/gpu-start.sh, so their rows compare):
#   BENCH_TIME_RUNS=N BENCH_TIME_WARMUP=W [BENCH_TIME_PAUSE_MS=P] \
#     python3 bench/lib/timeruns.py LABEL CMD...
# Wall time from spawn to exit (bench/lib/runlib.py) after W untimed
# warm-up runs, whose stderr names the reason when the command cannot run at
# all. With P > 0 the harness sleeps P ms (untimed) before each timed run: a
# start on an idle machine rather than one right after the last. "{i}" in
# CMD becomes a unique run tag (container ids). median = sorted[n/2], p90 =
# sorted[n*9/10]. Prints one line: "LABEL<TAB>ok<TAB>median_ms<TAB>p90_ms" or
# "LABEL<TAB>failed<TAB>reason".
import os, sys, time

from runlib import Hung, timed, warm_up

label, argv = sys.argv[1], sys.argv[2:]
runs, warmup = int(os.environ["BENCH_TIME_RUNS"]), int(os.environ["BENCH_TIME_WARMUP"])
pause_s = float(os.environ.get("BENCH_TIME_PAUSE_MS", "0")) / 1000


def cmd(tag):
    return [a.replace("{i}", f"{os.getpid()}-{tag}") for a in argv]


def fail(reason):
    print(f"{label}\tfailed\t{reason[:220]}")
    sys.exit(0)


for w in range(warmup):
    why = warm_up(cmd(f"w{w}"))
    if why:
        fail(why)

times = []
for i in range(runs):
    if pause_s > 0:
        time.sleep(pause_s)
    try:
        times.append(timed(cmd(i)))
    except (OSError, RuntimeError, Hung) as e:
        fail(f"run {i}: {e}")
times.sort()
print(f"{label}\tok\t{times[len(times) // 2]:.2f}\t{times[len(times) * 9 // 10]:.2f}")
