#!/usr/bin/env bash
# The .pth hook: torch is not imported by it; importing torch.distributed registers `hccltune` and `hccl`;
# HCCL_TUNE_TORCH_ALIAS=0 keeps `hccl` unregistered; a bad value warns and still registers `hccltune`; an
# installed vendor stack (a stand-in torch_npu) owns `hccl` and imports after torch; a bad value in another
# variable keeps `hccl` registered and creating the group names that variable.
# Usage: hook_test.sh PYTHON  (PYTHONUSERBASE points at the build tree's site directory)
set -euo pipefail
py=$1
"$py" -c 'import sys; assert "_hccl_tune_torch_hook" in sys.modules, "hook not loaded"; \
assert "torch" not in sys.modules, "hook imported torch"; print("hook loaded, torch not imported")'
"$py" -c 'import torch.distributed as d; p = d.Backend._plugins; \
assert "HCCLTUNE" in p and "HCCL" in p, p; assert d.Backend("hccl") == "hccl"; print("registered:", sorted(p))'
HCCL_TUNE_TORCH_ALIAS=0 "$py" -c 'import torch.distributed as d; p = d.Backend._plugins; \
assert "HCCLTUNE" in p and "HCCL" not in p, p; print("alias off:", sorted(p))'
out=$(HCCL_TUNE_TORCH_ALIAS=maybe "$py" -W always -c 'import torch.distributed as d; p = d.Backend._plugins; \
assert "HCCLTUNE" in p and "HCCL" not in p, p' 2>&1)
grep -q "HCCL_TUNE_TORCH_ALIAS" <<<"$out" || { echo "$out"; echo "no warning naming the variable" >&2; exit 1; }
echo "bad alias value: warned ($(grep -o 'HCCL_TUNE_TORCH_ALIAS[^;]*' <<<"$out" | head -1))"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A stand-in for Ascend's torch_npu: importing it registers the c10d backend `hccl`, after `import torch` (which
# imports torch.distributed, so our hook has run by then). Registering `hccl` ourselves made that import fail
# ("HCCL c10d backend already exist").
mkdir "$tmp/torch_npu"
cat >"$tmp/torch_npu/__init__.py" <<'EOF'
import torch.distributed as dist

FAKE = object()
dist.Backend.register_backend("hccl", lambda store, rank, size, timeout: FAKE)
EOF
PYTHONPATH="$tmp${PYTHONPATH:+:$PYTHONPATH}" "$py" -c 'import torch; import torch_npu
import torch.distributed as d; p = d.Backend._plugins
assert "HCCLTUNE" in p and p["HCCL"].creator_fn(None, 0, 1, None) is torch_npu.FAKE, p
print("torch_npu installed: it registered hccl, we registered", sorted(k for k in p if k != "HCCL"))'
# A bad HCCL_EXEC_TIMEOUT used to drop `hccl` silently (the alias check loaded the whole environment), so
# init_process_group("hccl") failed with "Invalid backend: 'hccl'" naming nothing.
out=$(HCCL_EXEC_TIMEOUT=abc "$py" -c 'import sys, torch.distributed as d
try:
    d.init_process_group("hccl", init_method="file://" + sys.argv[1], rank=0, world_size=1)
except Exception as e:
    print(type(e).__name__, e)
else:
    print("init_process_group succeeded")' "$tmp/store" 2>&1)
grep -q "HCCL_EXEC_TIMEOUT='abc'" <<<"$out" || { echo "$out"; echo "no error naming HCCL_EXEC_TIMEOUT" >&2; exit 1; }
echo "bad HCCL_EXEC_TIMEOUT with backend hccl: $(grep -o "HCCL_EXEC_TIMEOUT='abc'[^;]*" <<<"$out" | head -1)"
