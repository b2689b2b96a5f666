#!/usr/bin/env bash
# Demo testbed (make testbed): two network namespaces joined by a veth pair,
# a 256 MiB transfer from the libudt peer to our `udt`, then the reverse, with
# live stats, the summaries and a sha256 check. Needs root.
#
#   UDT_BIN=... LIBUDT_PEER=... SIZE_MIB=256 topologies/demo_transfer.sh
set -euo pipefail
cd "$(dirname "$0")/.."

UDT_BIN="${UDT_BIN:-impl/target/release/udt}"
LIBUDT_PEER="${LIBUDT_PEER:-build/libudt-peer}"
SIZE_MIB="${SIZE_MIB:-256}"
NS_A="udtd-$$-a"          # sender side
NS_B="udtd-$$-b"          # receiver side
ADDR_A=10.232.0.1
ADDR_B=10.232.0.2
PORT=9000

die() { echo "demo: error: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
for b in "$UDT_BIN" "$LIBUDT_PEER"; do
  [ -x "$b" ] || die "$b is not built (run 'make build')"
done
command -v jq >/dev/null || die "jq is missing (run 'make setup')"

work="$(mktemp -d /tmp/udt-demo.XXXXXX)"
pids=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM

echo "demo: namespaces $NS_A ($ADDR_A) <-veth-> $NS_B ($ADDR_B)"
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add veth0 netns "$NS_A" type veth peer name veth0 netns "$NS_B"
for ns in "$NS_A:$ADDR_A" "$NS_B:$ADDR_B"; do
  ip -n "${ns%%:*}" addr add "${ns#*:}/24" dev veth0
  ip -n "${ns%%:*}" link set veth0 up
  ip -n "${ns%%:*}" link set lo up
done

echo "demo: generating $SIZE_MIB MiB of random data"
head -c "$((SIZE_MIB << 20))" /dev/urandom > "$work/input"
want="$(sha256sum < "$work/input" | cut -d' ' -f1)"

# One stats JSON line (docs/cli.md) -> one table row.
row='[.role, .stack, (.t*100|round/100), (.bytes/1048576|floor), (.mbps|round),
      (.rtt_ms*1000|round/1000), (.cwnd|round), .flow_window, (.period_us*100|round/100),
      .losses, .retrans] | @tsv'
fmt='{ printf "%-5s %-7s %7s %9s %8s %9s %7s %7s %10s %7s %7s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11 }'
header() { printf "%-5s %-7s %7s %9s %8s %9s %7s %7s %10s %7s %7s\n" \
  role stack t_s MiB Mb/s rtt_ms cwnd window period_us losses retrans; }

failed=0
run() {  # run NAME SENDER_BIN RECEIVER_BIN
  local name="$1" sender="$2" receiver="$3" n="$((${#pids[@]}))"
  local out="$work/output-$n" rs="$work/recv-$n.jsonl" ss="$work/send-$n.jsonl"
  echo
  echo "=== $name: $(basename "$sender") send ($NS_A) -> $(basename "$receiver") recv ($NS_B), $SIZE_MIB MiB"
  : > "$rs"; : > "$ss"
  ip netns exec "$NS_B" "$receiver" recv --listen "$ADDR_B:$PORT" --output "$out" \
    --stats "$rs" --stats-interval 250 2> "$work/recv-$n.err" &
  local rpid=$!; pids+=("$rpid")
  sleep 0.2
  ip netns exec "$NS_A" "$sender" send --connect "$ADDR_B:$PORT" --input "$work/input" \
    --stats "$ss" --stats-interval 250 2> "$work/send-$n.err" &
  local spid=$!; pids+=("$spid")
  header
  tail -q -n +1 -F --pid="$rpid" "$ss" "$rs" 2>/dev/null | jq -r --unbuffered "select(.summary|not) | $row" | awk "$fmt" &
  local tpid=$!; pids+=("$tpid")
  local src=0 rrc=0
  wait "$spid" || src=$?
  wait "$rpid" || rrc=$?
  wait "$tpid" 2>/dev/null || true
  echo "--- summaries"
  header
  jq -r "select(.summary) | $row" "$ss" "$rs" | awk "$fmt"
  jq -r 'select(.summary) | "\(.role): \(.bytes) bytes in \(.seconds*1000|round/1000) s = \(.mbps|round) Mb/s"' "$ss" "$rs"
  local got=""
  [ -f "$out" ] && got="$(sha256sum < "$out" | cut -d' ' -f1)"
  if [ "$src" -ne 0 ] || [ "$rrc" -ne 0 ]; then
    echo "FAIL: sender exit $src, receiver exit $rrc"
    echo "sender stderr:";   sed 's/^/  /' "$work/send-$n.err"
    echo "receiver stderr:"; sed 's/^/  /' "$work/recv-$n.err"
    failed=1
  elif [ "$got" != "$want" ]; then
    echo "FAIL: sha256 mismatch (sent $want, received ${got:-nothing})"
    failed=1
  else
    echo "OK: sha256 $want matches"
  fi
  rm -f "$out"
}

run "libudt -> udt" "$LIBUDT_PEER" "$UDT_BIN"
run "udt -> libudt" "$UDT_BIN" "$LIBUDT_PEER"
echo
[ "$failed" -eq 0 ] && echo "demo: both transfers OK" || echo "demo: FAILED"
exit "$failed"
