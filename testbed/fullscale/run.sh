#!/usr/bin/env bash
# Runs the testbed at the papers' rates on a bare many-core Linux host from the full-scale bundle
# (testbed/fullscale/bundle.sh): `make fullscale` here, or on a borrowed host with only the
# working tree and the bundle, as root:
#
#   bash testbed/fullscale/run.sh [PLAN]     (default testbed/fullscale/plan-16.txt)
#
# Environment: BUNDLE (the bundle's directory or .tar.gz; default build/fullscale.tar.gz, else
# build/fullscale), RESULTS (default results/fullscale), SCALE (1), DURATION (seconds per stack and
# part, 100), DEADLINE_S (at this many seconds from the start a run still going is stopped, and
# a phase that could not end by then is not started; 0: none). Each plan line is one `udtbed run` with --cpuset, into RESULTS/<phase>-<cpus>/;
# RESULTS/host.txt is what the host is (kernel, CPUs, what it refuses), RESULTS/plan.log each
# line's start, end and exit status. The reports are drawn where matplotlib is (`udtbed report DIR`).
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
plan="${1:-testbed/fullscale/plan-16.txt}"
results="${RESULTS:-results/fullscale}"
scale="${SCALE:-1}" duration="${DURATION:-100}" deadline="${DEADLINE_S:-0}"
start=$(date +%s)
say() { echo "fullscale: $*" | tee -a "$results/plan.log"; }

[ -f "$plan" ] || { echo "fullscale: no plan file $plan" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "fullscale: run as root (network namespaces, veths, AF_PACKET)" >&2; exit 2; }
bundle="${BUNDLE:-}"
if [ -z "$bundle" ]; then
  if [ -f build/fullscale.tar.gz ]; then bundle=build/fullscale.tar.gz; else bundle=build/fullscale; fi
fi
if [ -f "$bundle" ]; then
  dir=$(mktemp -d /tmp/udtb-bundle.XXXXXX)
  tar -C "$dir" -xzf "$bundle" || { echo "fullscale: cannot unpack $bundle" >&2; exit 2; }
  bundle="$dir/fullscale"
fi
[ -f "$bundle/env.sh" ] || { echo "fullscale: $bundle is no bundle (no env.sh): make fullscale-bundle" >&2; exit 2; }
# shellcheck source=/dev/null
. "$bundle/env.sh"
export PYTHONPATH="$UDTB_BUNDLE/site:$repo/testbed:$repo/harness"

# A plan line's arguments split: its leading NAME=VALUE words into envs (the runner's environment,
# UDT_PACING=spin, ...; $UDTB_BUNDLE in a value is the bundle's directory), the rest into args.
split_envs() {
  envs=() args=$1
  while [[ "$args" =~ ^([A-Z_][A-Z0-9_]*=[^ ]*)\ +(.*)$ ]]; do
    envs+=("${BASH_REMATCH[1]//\$UDTB_BUNDLE/$UDTB_BUNDLE}")
    args="${BASH_REMATCH[2]}"
  done
}

# A value may name a file of the bundle (UDT_BIN=$UDTB_BUNDLE/bin/udt-base: the base build
# `make fullscale-bundle BASE=<ref>` adds); each must be there.
while read -r _ _ rest; do
  split_envs "$rest"
  for e in "${envs[@]}"; do
    if [[ "${e#*=}" == "$UDTB_BUNDLE/"* ]] && [ ! -e "${e#*=}" ]; then
      echo "fullscale: the plan names ${e#*=}, which this bundle lacks (make fullscale-bundle BASE=<ref> adds bin/udt-base)" >&2
      exit 2
    fi
  done
done < <(grep -v '^\s*#' "$plan" | grep -v '^\s*$')

# Every program of the bundle starts: a library the bundle lacks is named here, not mid-run.
for prog in "$UDTB_BUNDLE"/bin/*; do
  out=$(timeout 5 "$prog" --version 2>&1 </dev/null)
  if grep -q "error while loading shared libraries" <<< "$out"; then
    echo "fullscale: $prog does not start: ${out%%$'\n'*} (rebuild the bundle: make fullscale-bundle)" >&2
    exit 4
  fi
done
mkdir -p "$results"

# What the host is and what it refuses, before anything is built.
{
  echo "date: $(date -u +%FT%TZ)"
  echo "kernel: $(uname -srm)"
  echo "cpus: $(nproc) online, $(grep -c ^processor /proc/cpuinfo) in /proc/cpuinfo; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "memory: $(grep MemTotal /proc/meminfo | awk '{print $2/1048576 " GiB"}')"
  echo "bundle: $(head -1 "$UDTB_BUNDLE/MANIFEST")"
  echo "python: $(python3 -c 'import sys; print(sys.version.split()[0], sys.prefix)')"
  ns=udtb-probe-$$
  if ip netns add "$ns" 2>/dev/null; then
    ip -n "$ns" link add vpa type veth peer name vpb >/dev/null 2>&1 && echo "veth: yes" || echo "veth: NO"
    ip -n "$ns" link add br0 type bridge >/dev/null 2>&1 && echo "bridge: yes" || echo "bridge: NO"
    ip -n "$ns" link set vpa up 2>/dev/null
    tc -n "$ns" qdisc add dev vpa root tbf rate 1gbit burst 64kb latency 10ms >/dev/null 2>&1 \
      && echo "tbf: yes" || echo "tbf: NO"
    tc -n "$ns" qdisc replace dev vpa root netem delay 1ms >/dev/null 2>&1 && echo "netem: yes" || echo "netem: no"
    # Whether a stock kernel with netem could run here under KVM (udtbed vm; docs/testbed/backends.md).
    [ -r /dev/kvm ] && [ -w /dev/kvm ] && echo "kvm: /dev/kvm usable" || echo "kvm: no usable /dev/kvm"
    ip netns del "$ns"
    echo "netns: yes"
  else
    echo "netns: NO ($(ip netns add "$ns" 2>&1))"
  fi
  python3 - <<'PY'
import os, socket
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)); print("SCHED_FIFO: yes")
except OSError as e:
    print(f"SCHED_FIFO: refused ({e.strerror})")
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close(); print("AF_PACKET: yes")
except OSError as e:
    print(f"AF_PACKET: NO ({e.strerror})")
PY
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
  echo "rmem_max: $(cat /proc/sys/net/core/rmem_max) wmem_max: $(cat /proc/sys/net/core/wmem_max)"
} > "$results/host.txt" 2>&1
cat "$results/host.txt"
grep -q "^netns: yes" "$results/host.txt" && grep -q "^veth: yes" "$results/host.txt" \
  || { echo "fullscale: this host cannot build the testbed's namespaces (host.txt)" >&2; exit 4; }

# Socket buffers as large as a 1 Gb/s x 110 ms path needs (4.11 asks for 12 MB; the runner's TCP
# 64 MB): the caps are the host's (root namespace), so they are put back at the end.
caps=$(sysctl -n net.core.rmem_max net.core.wmem_max | paste -sd' ')
sysctl -qw net.core.rmem_max=67108864 net.core.wmem_max=67108864 || true
echo "socket buffer caps during the run: $(sysctl -n net.core.rmem_max net.core.wmem_max | paste -sd' ') (were $caps)" \
  | tee -a "$results/host.txt"
restore() { read -r r w <<< "$caps"; sysctl -qw net.core.rmem_max="$r" net.core.wmem_max="$w" || true; }
trap restore EXIT

# One lane: the plan's lines of one phase on one CPU set, in turn.
lane() {
  local phase=$1 cpus=$2 left args st out limit envs pid stopped=""
  while read -r args; do
    split_envs "$args"
    out="$results/$phase-$cpus"
    mkdir -p "$out"
    say "phase $phase cpus $cpus: ${envs[*]}${envs[*]:+ }udtbed run $args (scale $scale, ${duration} s) at +$(( $(date +%s) - start )) s"
    limit=()
    if [ "$deadline" -gt 0 ]; then
      left=$(( deadline - ($(date +%s) - start) ))
      limit=(timeout -s TERM -k 20 "$left")
    fi
    # In the background, so that this lane can pass a TERM on (a background job ignores SIGINT,
    # and so does the runner it starts; the runner stops cleanly on TERM).
    # shellcheck disable=SC2086
    "${limit[@]}" env "${envs[@]}" python3 -m udtbed run $args --scale "$scale" --duration "$duration" --cpuset "$cpus" \
      --influx none --simulate none --results "$out" >> "$out/run.log" 2>&1 </dev/null &
    pid=$!
    trap 'kill -TERM "$pid" 2>/dev/null; stopped=1' TERM
    st=0
    while kill -0 "$pid" 2>/dev/null; do wait "$pid"; st=$?; done
    trap - TERM
    say "phase $phase cpus $cpus: exit $st at +$(( $(date +%s) - start )) s ($args)"
    [ "$st" -eq 0 ] && [ -z "$stopped" ] || return 1
  done < <(grep -v '^\s*#' "$plan" | awk -v p="$phase" -v c="$cpus" '$1 == p && $2 == c {$1 = ""; $2 = ""; sub(/^ +/, ""); print}')
}

# Ctrl-C or TERM: every lane's runner stops as it does alone (namespaces and processes gone, the
# experiments it finished kept), then the socket buffer caps are put back.
children=()
stop() {
  trap '' INT TERM
  say "interrupted: stopping the runs"
  for p in "${children[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait
  python3 -m udtbed cleanup >/dev/null
  exit 130
}
trap stop INT TERM

rc=0
lines=$(grep -v '^\s*#' "$plan" | awk 'NF')
for phase in $(awk '{print $1}' <<< "$lines" | sort -un); do
  elapsed=$(( $(date +%s) - start ))
  # A run takes at least its parts' stacks' DURATION each; a phase less than two of them is not started.
  if [ "$deadline" -gt 0 ] && [ $(( deadline - elapsed )) -lt $(( 2 * ${duration%.*} + 30 )) ]; then
    say "phase $phase skipped: $(( deadline - elapsed )) s left of DEADLINE_S=$deadline"
    rc=1
    continue
  fi
  children=()
  for cpus in $(awk -v p="$phase" '$1 == p {print $2}' <<< "$lines" | awk '!seen[$0]++'); do
    lane "$phase" "$cpus" &
    children+=("$!")
  done
  for p in "${children[@]}"; do wait "$p" || rc=1; done
done
python3 -m udtbed cleanup >/dev/null || true
say "done in $(( $(date +%s) - start )) s, exit $rc"
exit "$rc"
