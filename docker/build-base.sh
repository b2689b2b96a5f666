#!/usr/bin/env bash
# Makes `debian:bookworm-slim` available to `docker build` on a machine without a container
# registry: if the tag is not there yet, it is built from Debian's apt mirror with
# `debootstrap --variant=minbase bookworm` and `docker import`, trimmed like the official slim
# image (no docs, man pages or locales). Where a registry is reachable it pulls the official
# image instead (no root needed then). Idempotent: silent when the tag exists. Root
# (debootstrap); installs debootstrap itself if it is missing.
#
#   docker/build-base.sh                       # the tag docker/Dockerfile.stacks builds FROM
#   DEBIAN_MIRROR=http://mirror/debian docker/build-base.sh
set -euo pipefail

TAG=${BASE_TAG:-debian:bookworm-slim}
SUITE=bookworm

if docker image inspect "$TAG" >/dev/null 2>&1; then
  exit 0
fi
if ! docker info >/dev/null 2>&1; then
  echo "build-base: the Docker daemon is not reachable (is it running? \`systemctl start docker\`)" >&2
  exit 1
fi
if docker pull -q "$TAG" >/dev/null 2>&1; then
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "build-base: $TAG is missing and building it (debootstrap) needs root" >&2
  exit 1
fi

# The mirror apt already uses here, so that the image reaches what the host reaches.
host_mirror() {
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'
  } | grep -v -- '-security' | head -n1 || true
}
MIRROR=${DEBIAN_MIRROR:-$(host_mirror)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${DEBIAN_SECURITY_MIRROR:-${MIRROR%/debian}/debian-security}

if ! command -v debootstrap >/dev/null; then
  echo "==> build-base: apt-get install debootstrap"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >/tmp/udtb-apt.log 2>&1 ||
    { cat /tmp/udtb-apt.log >&2; echo "build-base: apt-get install debootstrap failed" >&2; exit 1; }
fi

echo "==> build-base: $TAG is not here; building it with debootstrap ($SUITE minbase from $MIRROR)"
start=$SECONDS
work=$(mktemp -d /var/tmp/udtb-base.XXXXXX)
trap 'umount -R "$work/rootfs/proc" "$work/rootfs/sys" 2>/dev/null || true; rm -rf "$work"' EXIT
root=$work/rootfs
if ! debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1; then
  tail -n 30 "$work/debootstrap.log" >&2
  echo "build-base: debootstrap failed (log above)" >&2
  exit 1
fi

# What the official slim image configures: dpkg leaves out docs, man pages and translations,
# apt keeps no downloaded .debs and fetches no translation indexes.
cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/{man,groff,info,lintian,linda}/* "$root/var/lib/apt/lists/"* \
       "$root/var/cache/apt/"*.bin "$root/var/cache/apt/archives/"*.deb "$root/var/log/"*.log
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
: >"$root/etc/hostname"
: >"$root/etc/resolv.conf"  # Docker bind-mounts its own

tar --numeric-owner -C "$root" -c . |
  docker import --change 'CMD ["bash"]' \
    --change 'LABEL org.udtbed.base="debootstrap --variant=minbase '"$SUITE"' (docker/build-base.sh)"' \
    -m "debootstrap --variant=minbase $SUITE $MIRROR" - "$TAG" >/dev/null
echo "==> build-base: $TAG built in $((SECONDS - start)) s ($(docker image inspect -f '{{.Size}}' "$TAG" | numfmt --to=iec))"
