#!/usr/bin/env bash
# Installs everything the repository needs on a fresh Debian bookworm machine
# (run as root). Idempotent and quiet when nothing is missing.
#
#   ci/setup.sh         system packages, .venv with requirements-dev.txt
#   ci/setup.sh fuzz    the above plus cargo-fuzz
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-default}"
case "$mode" in
  default|fuzz) ;;
  *) echo "usage: ci/setup.sh [fuzz]" >&2; exit 2 ;;
esac

say() { echo "setup: $*"; }

# --- Debian packages -------------------------------------------------------
APT_PACKAGES=(
  libudt-dev g++ make                     # the libudt reference peer
  tshark tcpdump                          # captures (conformance)
  iperf3 iproute2 iputils-ping bridge-utils ethtool mininet   # testbed
  strace                                  # testbed: the netem request tc sends (test_netem_commands)
  influxdb jq                             # metrics
  ns2                                     # make ns2-check: NS-2 2.35's TCP beside the simulator's (udtbed.simulation.ns2check)
  chromium fonts-dejavu-core              # screenshots of the report and progress display (udtbed.results.screenshot)
  linux-image-amd64 qemu-system-x86 busybox-static   # make test-vm: a stock kernel with netem, booted by virtme-ng
  user-mode-linux                         # make test-vm VM_ACCEL=uml: a 6.1 kernel with netem on the real CPU
  openssh-server openssh-client sudo     # make test: the cluster lab's servers (udtbed.emulation.lab, udtbed.emulation.cluster)
  python3-venv
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]} (run as root)" >&2
    exit 1
  fi
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer no, non-interactively.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- Python virtualenv -----------------------------------------------------
# Reinstalled only when the requirements (or the conformance package's
# declared dependencies) changed.
if [ ! -x .venv/bin/python ]; then
  say "creating .venv ($(python3 --version))"
  python3 -m venv .venv
fi
stamp=.venv/.requirements.sha256
want="$(cat requirements-dev.txt conformance/pyproject.toml 2>/dev/null | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python packages from requirements-dev.txt into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
  echo "$want" > "$stamp"
fi

# --- Rust ------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found: install the Rust toolchain (rustup) first" >&2
  exit 1
fi
if [ "$mode" = fuzz ] && ! cargo fuzz --version >/dev/null 2>&1; then
  say "installing cargo-fuzz"
  cargo install --quiet --locked cargo-fuzz
fi
