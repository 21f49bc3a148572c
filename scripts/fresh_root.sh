#!/usr/bin/env bash
# fresh_root.sh - runs the README's commands in a clean Debian root, as a new user would.
#
#   scripts/fresh_root.sh            (as root; needs debootstrap, chroot and mount)
#
# A machine that has built nnroute before hides missing install steps: a package installed
# by hand once makes every later build pass. This script proves the opposite case. It
# makes (or takes from its cache) a `debootstrap --variant=minbase` root of the Debian
# suite, copies in only the machine's package-access settings (apt sources and options,
# keyrings they name, CA certificates, pip's configuration and the PIP_* / SSL_CERT_* /
# REQUESTS_CA_BUNDLE / proxy environment, DNS), unpacks a `git archive` of the commit under
# test, mounts /proc, /dev and a /tmp, and runs inside:
#   1. scripts/example.sh, end to end (bootstrap, build, run, compare, tune);
#   2. a CPU-only configure (-DNR_CUDA=OFF), the full build, and ctest (unit tests,
#      the ONNX node conformance suite, the install check).
# Each step prints its time; the exit status is non-zero when either failed.
#
# The minbase root is cached as a tarball outside the checkout, in NR_FRESH_CACHE
# (default /var/cache/nnroute-fresh), under a key made of the suite, the architecture
# and the mirror, and rebuilt when absent, so a cold run differs from a warm one only in
# time. Nothing else is kept between runs: the root is unpacked anew each time and
# removed afterwards.
#
# Environment: NR_FRESH_SUITE (default bookworm, Debian 12), NR_FRESH_MIRROR (default:
# the first URI the machine's apt sources give for that suite), NR_FRESH_REV (default
# HEAD), NR_FRESH_CACHE, NR_FRESH_KEEP=1 (leave the root in place for a look).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
suite=${NR_FRESH_SUITE:-bookworm}
rev=${NR_FRESH_REV:-HEAD}
cache=${NR_FRESH_CACHE:-/var/cache/nnroute-fresh}
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
root=""

say() { echo "fresh: $*"; }
die() { say "$*"; exit 1; }

# The first mirror URI the machine's apt sources list for $suite (deb822 .sources files
# or one-line .list entries).
mirror_for_suite() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk -v suite="$suite" '
      function flush() { if (uri != "" && has) { print uri; exit } uri = ""; has = 0 }
      /^[[:space:]]*$/ { flush(); next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) has = 1 }
      END { flush() }' "$f"
  done
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v suite="$suite" '$1 == "deb" { u = ($2 ~ /^\[/) ? $3 : $2; s = ($2 ~ /^\[/) ? $4 : $3
                                         if (s == suite) print u }'
}

# The minbase tarball for (suite, arch, mirror): from the cache, or made now.
minbase_tarball() {
  local key tarball tmp
  key=$suite-$arch-$(printf '%s' "$mirror" | sha256sum | cut -c1-12)
  tarball=$cache/minbase-$key.tar.gz
  if [[ -s $tarball ]]; then
    say "minbase root from the cache: $tarball" >&2
    echo "$tarball"
    return 0
  fi
  command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
  mkdir -p "$cache" || return 1
  tmp=$(mktemp -d "$cache/make.XXXXXX") || return 1
  say "debootstrap --variant=minbase $suite from $mirror (cache was empty)" >&2
  if ! debootstrap --variant=minbase --arch="$arch" "$suite" "$tmp/root" "$mirror" \
      >"$tmp/debootstrap.log" 2>&1; then
    tail -n 20 "$tmp/debootstrap.log" >&2
    rm -rf "$tmp"
    return 1
  fi
  tar -C "$tmp/root" --numeric-owner -czf "$tmp/root.tar.gz" . &&
    mv "$tmp/root.tar.gz" "$tarball"
  local rc=$?
  rm -rf "$tmp"
  ((rc == 0)) && echo "$tarball"
  return $rc
}

cleanup() {
  [[ -n $root && -d $root ]] || return 0
  local m
  for m in tmp dev proc; do
    mountpoint -q "$root/$m" && { umount -R "$root/$m" 2>/dev/null || umount -R -l "$root/$m"; }
  done
  if [[ ${NR_FRESH_KEEP:-0} == 1 ]]; then
    say "root left in $root"
  else
    rm -rf --one-file-system "$root"
  fi
}

# The machine's package-access settings, and nothing of the project's.
copy_access_settings() {
  local f key
  mkdir -p "$root/etc/apt/sources.list.d" "$root/etc/apt/apt.conf.d" \
    "$root/usr/local/share/ca-certificates" "$root/etc/ssl/certs"
  rm -f "$root/etc/apt/sources.list"
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -s $f ]] || continue
    cp "$f" "$root$f"
    # keyrings named by Signed-By that the minbase root lacks
    for key in $(grep -o 'signed-by=[^] ]*\|Signed-By: *[^ ]*' "$f" | sed 's/.*[=:] *//'); do
      [[ -f $key && ! -f $root$key ]] && mkdir -p "$root$(dirname "$key")" && cp "$key" "$root$key"
    done
  done
  for f in /etc/apt/apt.conf.d/*; do
    grep -q 'Acquire::' "$f" 2>/dev/null && cp "$f" "$root$f"
  done
  cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null
  [[ -f /etc/ssl/certs/ca-certificates.crt ]] &&
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  [[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$root/etc/pip.conf"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
  cp /etc/hosts "$root/etc/hosts" 2>/dev/null
  # the environment that reaches the registries, as NAME=VALUE lines for env -i
  env | grep -E '^(PIP_[A-Z_]*|SSL_CERT_[A-Z_]*|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|[Hh][Tt][Tt][Pp][Ss]?_[Pp][Rr][Oo][Xx][Yy]|[Nn][Oo]_[Pp][Rr][Oo][Xx][Yy])=' \
    >"$root/root/.fresh-env"
  # a find-links folder named by the environment must exist, even if empty
  local links
  links=$(sed -n 's/^PIP_FIND_LINKS=//p' "$root/root/.fresh-env")
  for f in $links; do [[ $f == /* ]] && mkdir -p "$root$f"; done
}

# run_in NAME COMMAND: runs COMMAND with bash in the root's checkout, timed.
results=()
failed=0
run_in() {
  local name=$1 cmd=$2 t0=$SECONDS rc
  say "== $name"
  local envs=()
  mapfile -t envs <"$root/root/.fresh-env"
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${envs[@]}" \
    /bin/bash -c "cd /root/nnroute && $cmd"
  rc=$?
  results+=("$name: $( ((rc == 0)) && echo ok || echo FAILED) $((SECONDS - t0)) s")
  ((rc == 0)) || failed=1
  say "-- $name: rc $rc, $((SECONDS - t0)) s"
}

main() {
  ((EUID == 0)) || die "needs root (debootstrap, chroot, mount)"
  mirror=${NR_FRESH_MIRROR:-$(mirror_for_suite | head -n 1)}
  [[ -n $mirror ]] || die "the machine's apt sources name no mirror for $suite (set NR_FRESH_MIRROR)"
  git -C "$repo" rev-parse --verify -q "$rev^{commit}" >/dev/null || die "no commit $rev in $repo"
  [[ -z $(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null) ]] ||
    say "note: the work tree has uncommitted changes; the root gets $rev as committed"

  local t0=$SECONDS tarball
  tarball=$(minbase_tarball) || die "could not make the minbase root"
  local t_root=$((SECONDS - t0))
  root=$(mktemp -d /var/tmp/nnroute-fresh.XXXXXX) || die "mktemp failed"
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  tar -C "$root" --numeric-owner -xzf "$tarball" || die "could not unpack $tarball"
  copy_access_settings
  mkdir -p "$root/root/nnroute"
  git -C "$repo" archive "$rev" | tar -x -C "$root/root/nnroute" || die "git archive $rev failed"
  mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" &&
    mount --make-rslave "$root/dev" && mount -t tmpfs -o size=8g tmpfs "$root/tmp" ||
    die "could not mount /proc, /dev and /tmp in the root"
  say "root $root ready in $((SECONDS - t0)) s (minbase: $t_root s), commit $(git -C "$repo" rev-parse --short "$rev")"

  run_in example "bash scripts/example.sh"
  run_in cpu-build "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DNR_CUDA=OFF >/dev/null &&
    cmake --build build -j${NR_JOBS:-2} && ctest --test-dir build --output-on-failure"

  say "summary ($((SECONDS - t0)) s in all):"
  printf 'fresh:   %s\n' "root ready: $t_root s for the minbase tarball" "${results[@]}"
  return $failed
}

main "$@"
