#!/usr/bin/env bash
# PID-file helpers shared by slurm-up.sh and slurm-down.sh (sourced; the
# caller defines log()). A PID file counts only if the process is alive and
# still the program we started (guards against PID reuse).

pid_alive() { # <pidfile> <comm>
  local pid
  [ -s "$1" ] || return 1
  pid="$(cat "$1")"
  [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  # A zombie (state Z) has exited; its parent (often init) has not reaped it yet.
  [ "$(sed -n 's/^.*) \(.\).*$/\1/p' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

stop_pid() { # <pidfile> <comm>: TERM, wait up to 10 s, then KILL
  local pid
  if pid_alive "$1" "$2"; then
    pid="$(cat "$1")"
    log "stopping $2 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do pid_alive "$1" "$2" || break; sleep 0.1; done
    if pid_alive "$1" "$2"; then
      log "$2 (pid $pid) ignored TERM; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$1"
}
