#!/usr/bin/env bash
# Start a local Docker engine for the test suite, if one is not already answering.
#
# Idempotent: exits 0 immediately when `docker info` works. Otherwise starts
# dockerd in the background with settings that work inside a container/VM with
# no systemd, no iptables and no overlayfs, then polls until it answers.
#
# Env overrides:
#   DOCKERD_LOG      log file                    (default /tmp/hades-dockerd.log)
#   DOCKERD_TIMEOUT  seconds to wait for startup (default 60)
set -euo pipefail

LOG="${DOCKERD_LOG:-/tmp/hades-dockerd.log}"
TIMEOUT="${DOCKERD_TIMEOUT:-60}"
PIDFILE=/var/run/docker.pid

docker_ok() { docker info >/dev/null 2>&1; }

print_version() {
    docker version --format 'docker engine {{.Server.Version}} (API {{.Server.APIVersion}}), client {{.Client.Version}}' 2>/dev/null \
        || docker version
}

if docker_ok; then
    echo "start-dockerd: Docker already running: $(print_version)"
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
    echo "start-dockerd: dockerd not found (apt-get install docker.io)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "start-dockerd: must run as root to start dockerd" >&2
    exit 1
fi

# A dockerd may already be starting (e.g. started a moment ago by another
# invocation). Only launch a new one if no live dockerd owns the pidfile.
existing=""
if [ -f "$PIDFILE" ]; then
    pid="$(cat "$PIDFILE" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null \
        && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "dockerd" ]; then
        existing="$pid"
    fi
fi

if [ -n "$existing" ]; then
    echo "start-dockerd: dockerd (pid $existing) already running but not answering yet; waiting"
    DPID="$existing"
    STARTED=0
else
    echo "start-dockerd: starting dockerd (log: $LOG)"
    # setsid + nohup: fully detach, so it survives the calling shell / CI step.
    setsid nohup dockerd \
        --iptables=false \
        --ip6tables=false \
        --bridge=none \
        --storage-driver=vfs \
        >"$LOG" 2>&1 </dev/null &
    DPID=$!
    STARTED=1
fi

log_tail() {
    if [ "$STARTED" -eq 1 ] && [ -f "$LOG" ]; then
        echo "--- last lines of $LOG ---" >&2
        tail -n 40 "$LOG" >&2 || true
    elif [ "$STARTED" -eq 0 ]; then
        echo "(dockerd pid $DPID was not started by this script; see its own log)" >&2
    fi
}

start_ms=$(( $(date +%s%N) / 1000000 ))
deadline=$(( $(date +%s) + TIMEOUT ))
while ! docker_ok; do
    if ! kill -0 "$DPID" 2>/dev/null; then
        echo "start-dockerd: dockerd (pid $DPID) exited during startup" >&2
        log_tail
        exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "start-dockerd: dockerd (pid $DPID) did not answer within ${TIMEOUT}s" >&2
        log_tail
        if [ "$STARTED" -eq 1 ]; then
            # Don't leave a half-started daemon behind; a rerun starts fresh.
            kill "$DPID" 2>/dev/null || true
        fi
        exit 1
    fi
    sleep 0.2
done

elapsed_ms=$(( $(date +%s%N) / 1000000 - start_ms ))
echo "start-dockerd: up after $((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))s: $(print_version)"
