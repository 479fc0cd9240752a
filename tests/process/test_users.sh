# Sourced by process tests that run commands as other Unix users (root only): idempotent creation of the system
# groups and users they need.
ensure_groups() {  # ensure_groups GROUP...
  local g
  for g in "$@"; do getent group "$g" >/dev/null || groupadd --system "$g"; done
}
ensure_user() {  # ensure_user NAME GROUPS: a system user without a home, in GROUPS (comma-separated)
  getent passwd "$1" >/dev/null || useradd --system --no-create-home --shell /usr/sbin/nologin "$1"
  usermod -G "$2" "$1"
}
