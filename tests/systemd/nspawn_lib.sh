# Shared by the tests that boot a Debian root file system under systemd-nspawn (unit_test.sh, package_test.sh).
# Source it; every function fails the calling test (via its `fail`) on error.

# The Debian archive apt on this machine uses (deb822 sources first), else deb.debian.org.
nspawn_mirror() {
  local m
  m=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  [[ -n $m ]] || m=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  echo "${m:-http://deb.debian.org/debian}"
}

# nspawn_base DIR PACKAGES: a bookworm minbase root with PACKAGES (comma-separated) in DIR, built by debootstrap
# once and rebuilt when the package list changes.
nspawn_base() {
  local dir=$1 include=$2
  if [[ ! -f $dir/.include || $(cat "$dir/.include") != "$include" ]]; then
    echo "== debootstrap bookworm from $(nspawn_mirror) (minbase + $include)"
    rm -rf "$dir"
    mkdir -p "$(dirname "$dir")"
    debootstrap --variant=minbase --include="$include" bookworm "$dir" "$(nspawn_mirror)" \
      >"$dir.debootstrap.log" 2>&1 || fail "debootstrap failed: $(tail -5 "$dir.debootstrap.log")"
    echo "$include" >"$dir/.include"
  fi
}

# nspawn_boot ROOT LOG [nspawn options...]: boots ROOT with systemd as PID 1 in a network namespace of its own
# until it powers itself off (at most 25 min).
nspawn_boot() {
  local root=$1 log=$2
  shift 2
  mountpoint -q /run/systemd/nspawn || { mkdir -p /run/systemd/nspawn && mount -t tmpfs tmpfs /run/systemd/nspawn; }
  local start
  start=$(date +%s)
  timeout 1500 systemd-nspawn --quiet --register=no --keep-unit --private-network -D "$root" "$@" -b \
    >"$log" 2>&1 || true
  echo "== container powered off after $(($(date +%s) - start)) s"
}

# nspawn_driver ROOT NAME SCRIPT ARGS...: a oneshot unit NAME.service that runs SCRIPT (copied into ROOT) as root
# once multi-user.target is up, then powers the container off whether it failed or not.
nspawn_driver() {
  local root=$1 name=$2 script=$3
  shift 3
  mkdir -p "$root/usr/local/libexec/hccl-tune-test"
  install -m 0755 "$script" "$root/usr/local/libexec/hccl-tune-test/$(basename "$script")"
  cat >"$root/etc/systemd/system/$name.service" <<UNIT
[Unit]
Description=hccl-tune test driver ($name)
After=multi-user.target
SuccessAction=poweroff
FailureAction=poweroff
[Service]
Type=oneshot
ExecStart=/usr/local/libexec/hccl-tune-test/$(basename "$script") $*
TimeoutStartSec=1200
UNIT
  systemctl --root="$root" add-wants multi-user.target "$name.service" >/dev/null 2>&1
}

# The root check and the tools every nspawn test needs (exit 77 = skipped when not root).
nspawn_require() {
  if [[ $(id -u) != 0 ]]; then
    echo "$(basename "$0"): needs root (debootstrap, systemd-nspawn); skipped"
    exit 77
  fi
  local tool
  for tool in debootstrap systemd-nspawn systemctl sqlite3 jq "$@"; do
    command -v "$tool" >/dev/null || fail "$tool is missing (deploy/install-deps.sh installs it)"
  done
}
