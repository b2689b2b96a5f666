#!/usr/bin/env bash
# Builds the full-scale bundle (docs/testbed/fullscale.md, "Full scale on a borrowed host"): everything the
# testbed's runner needs on a bare many-core Linux host that has no iproute2, Mininet, Rust or
# Python packages of ours, in one relocatable tree and one archive.
#
#   testbed/fullscale/bundle.sh [OUT]      (default build/fullscale; run `make build` first)
#   BASE=<git ref> testbed/fullscale/bundle.sh   also bin/udt-base: that commit's udt, built in its
#                                          own worktree as `udtbed gate` builds it (build/gate/<sha>),
#                                          for plan lines that run it as udt-rs
#                                          (UDT_BIN=$UDTB_BUNDLE/bin/udt-base ...: an A/B on the host)
#
# OUT/ holds bin/ (our stacks, udt-linkem, Debian's ip, tc, ethtool, iperf3, tcpdump, ping, ifconfig,
# sysctl, bash, mnexec and python3.11), lib/ (every shared library they load except glibc's, and
# libudt.so.0), lib/python3.11 (the standard library), site/ (Mininet's Python package, rich) and
# env.sh; OUT.tar.gz is the same tree, the one file a borrowed host needs beside the working tree.
# glibc stays the host's: Debian's binaries run on a newer glibc, never on an older one.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-build/fullscale}"
venv_site=$(ls -d .venv/lib/python3*/site-packages 2>/dev/null | head -1)
py=/usr/bin/python3.11

release=impl/target/release
ours=("$release/udt" "$release/sabul" "$release/frtp" "$release/udt-linkem" build/libudt-peer)
tools=(ip tc ethtool iperf3 tcpdump ping sysctl bash mnexec ifconfig which)
missing=()
for f in "${ours[@]}"; do [ -x "$f" ] || missing+=("$f"); done
for t in "${tools[@]}"; do command -v "$t" >/dev/null || missing+=("$t"); done
[ -x "$py" ] || missing+=("$py")
[ -n "$venv_site" ] || missing+=(".venv (rich)")
[ -d /usr/lib/python3/dist-packages/mininet ] || missing+=("Debian's mininet")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "fullscale-bundle: missing ${missing[*]}: run \`make setup build\` first" >&2
  exit 1
fi

base_udt="" base_sha=""
if [ -n "${BASE:-}" ]; then
  # shellcheck disable=SC2016
  base=$(cd testbed && ../.venv/bin/python -c '
import sys
from udtbed.results.gate import GateError, base_binary
try:
    sha, binary = base_binary(sys.argv[1], log=lambda m: print(m, file=sys.stderr))
except GateError as e:
    sys.exit(f"fullscale-bundle: BASE={sys.argv[1]}: {e}")
print(sha, binary)' "$BASE") || exit 1
  read -r base_sha base_udt <<< "$base"
fi

rm -rf "$out" "$out.tar.gz"
mkdir -p "$out/bin" "$out/lib" "$out/site"
for f in "${ours[@]}"; do
  install -m 0755 "$f" "$out/bin/"
  strip --strip-debug "$out/bin/$(basename "$f")"
done
if [ -n "$base_udt" ]; then
  install -m 0755 "$base_udt" "$out/bin/udt-base"
  strip --strip-debug "$out/bin/udt-base"
fi
for t in "${tools[@]}"; do install -m 0755 "$(command -v "$t")" "$out/bin/"; done
install -m 0755 "$py" "$out/bin/python3.11"
ln -s python3.11 "$out/bin/python3"

# The standard library, without what a run never imports (tests, IDLE, Tk, 2to3, pip's wheels).
stdlib=/usr/lib/python3.11
mkdir -p "$out/lib/python3.11"
tar -C "$stdlib" --exclude=__pycache__ --exclude=test --exclude=idlelib --exclude=tkinter \
  --exclude=turtledemo --exclude=lib2to3 --exclude=ensurepip --exclude=config-3.11-x86_64-linux-gnu \
  --exclude=site-packages --exclude=dist-packages -cf - . | tar -C "$out/lib/python3.11" -xf -
cp -a /usr/lib/python3/dist-packages/mininet "$out/site/"
for p in rich pygments markdown_it mdurl; do cp -a "$venv_site/$p" "$out/site/"; done
find "$out/site" -name __pycache__ -prune -exec rm -rf {} +

# Every shared library the binaries and Python's extension modules load, glibc's excepted.
glibc='^(libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libnss_.*|ld-linux-x86-64|linux-vdso)\.so'
{
  for f in "$out"/bin/* "$out"/lib/python3.11/lib-dynload/*.so; do
    [ -L "$f" ] && continue
    { ldd "$f" 2>/dev/null || true; } | awk '/=> \// {print $3}'
  done
} | sort -u | while read -r lib; do
  base=$(basename "$lib")
  if [[ ! "$base" =~ $glibc ]]; then cp -L "$lib" "$out/lib/$base"; fi
done
unresolved=$(for f in "$out"/bin/* "$out"/lib/*.so*; do
  LD_LIBRARY_PATH="$out/lib" ldd "$f" 2>/dev/null | grep 'not found' || true
done | sort -u)
if [ -n "$unresolved" ]; then
  echo "fullscale-bundle: libraries not found: $unresolved" >&2
  exit 1
fi

cat > "$out/env.sh" <<'ENV'
# Source this on the borrowed host: `. BUNDLE/env.sh` (bash). Everything the runner starts then
# comes from the bundle, our stacks through the variables the stacks' meta.toml files name.
UDTB_BUNDLE=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
export UDTB_BUNDLE
export PATH="$UDTB_BUNDLE/bin:$PATH"
export LD_LIBRARY_PATH="$UDTB_BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
export UDTBED_MININET_SITE="$UDTB_BUNDLE/site"
export UDT_BIN="$UDTB_BUNDLE/bin/udt" SABUL_BIN="$UDTB_BUNDLE/bin/sabul" FRTP_BIN="$UDTB_BUNDLE/bin/frtp"
export LIBUDT_PEER="$UDTB_BUNDLE/bin/libudt-peer" UDT_LINKEM="$UDTB_BUNDLE/bin/udt-linkem"
ENV
commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- testbed topologies impl 2>/dev/null || echo -dirty)"
echo "export UDTBED_COMMIT=$commit  # the checkout the bundle was built from (run.json's commit)" >> "$out/env.sh"
[ -z "$base_sha" ] || echo "export UDTBED_BASE_COMMIT=$base_sha  # bin/udt-base's commit (BASE)" >> "$out/env.sh"
{
  echo "built $(date -u +%FT%TZ) from $commit${base_sha:+, bin/udt-base from $base_sha}"
  (cd "$out" && find . -type f -o -type l | sort)
} > "$out/MANIFEST"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | gzip -6 > "$out.tar.gz"
echo "fullscale-bundle: $out ($(du -sh "$out" | cut -f1)), $out.tar.gz ($(du -h "$out.tar.gz" | cut -f1))"
