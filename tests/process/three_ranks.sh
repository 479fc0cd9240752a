# Sourced by process tests of 3-rank local jobs (needs `d` and `fail` from the caller).
# start_job CMD...: starts CMD (a job of 3 ranks that runs until stopped) in the background, output in $d/out and
# $d/err; sets job and pids[r] (rank r's pid, from RANK in its environment — not from its name, which may be under
# test). A child seen between fork and exec still has the spawner's environment (no RANK): it is read again until
# every rank has exec'd.
start_job() {
  "$@" > "$d/out" 2> "$d/err" &
  job=$!
  local kids=() p r
  for _ in $(seq 200); do
    mapfile -t kids < <(pgrep -P "$job" || true)
    pids=()
    if [[ ${#kids[@]} == 3 ]]; then
      for p in "${kids[@]}"; do
        r=$(tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | sed -n 's/^RANK=//p')
        [[ -n $r ]] && pids[r]=$p
      done
      [[ ${#pids[@]} == 3 ]] && return 0
    fi
    sleep 0.05
  done
  [[ ${#kids[@]} == 3 ]] || fail "$* did not start 3 ranks"
  fail "ranks by pid: ${pids[*]}"
}
