#!/usr/bin/env bash
# tests/gpu_check.sh BUILD [OUT] - the CUDA backend on a machine with a GPU, in one go
# (docs/kernels.md, "Verified on a GPU"): BUILD is a build configured with -Dcuda=enabled,
# OUT (default ./gpu-check) receives one log per step. The steps:
#   - the comparison tests: cuda_host, cuda_elem, cuda_gemm, cuda_attn, cuda_model (each
#     CUDA kernel and whole networks against the CPU twin); a failing one is run again
#     under compute-sanitizer's memcheck where that tool is on PATH;
#   - generate on CUDA against the CPU (tests/cuda_generate.py) and on checkpoints the
#     tests write against a float64 reference (tests/hf_reference.py --backend cuda);
#   - replay on CUDA of experiments/engine/cpu.json (the simulator serves the same
#     requests and tokens), the omni pipeline with barge-in and the host tier, and Nova on
#     green contexts: every request accounted for;
#   - the benchmark (tests/bench_cuda.c);
#   - profile, calibrate and validate on CUDA, validate on a held-out trace slice (the
#     trace from 900 s on).
# Prints a table of the steps (exit status, seconds) last; exits 1 if any step failed.
set -u
build=$(cd "$1" && pwd)
out=${2:-gpu-check}
root=$(cd "$(dirname "$0")/.." && pwd)
cz=$build/cli/cadenza
mkdir -p "$out"
out=$(cd "$out" && pwd)
export CZ_SOURCE_ROOT=$root
py=$(command -v python3)
rows=()
failed=0

# step NAME LIMIT_S CMD...: runs CMD with its output in OUT/NAME.log
step() {
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    echo "== $name: $*" | tee -a "$out/steps.log"
    timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    tail -n 25 "$out/$name.log"
    rows+=("| $name | $rc | $((SECONDS - t0)) |")
    [ $rc -eq 0 ] || failed=1
    return $rc
}

# accounted NAME SUMMARY N: a whole run (not partial) of N requests, each completed,
# aborted, rejected or failed, none unfinished; a row in the table either way
accounted() {
    "$py" - "$2" "$3" <<'PY' | tee -a "$out/steps.log"
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
ends = sum(d[k] for k in ("completed", "aborted", "rejected", "failed"))
ok = not d["partial"] and d["requests"] == n and ends == n and d["unfinished"] == 0
print(f"{sys.argv[1]}: {d['requests']} requests: completed {d['completed']}, aborted "
      f"{d['aborted']}, rejected {d['rejected']}, failed {d['failed']}, unfinished "
      f"{d['unfinished']}, partial {d['partial']}: {'accounted' if ok else 'NOT ACCOUNTED'}")
sys.exit(0 if ok else 1)
PY
    local rc=${PIPESTATUS[0]}
    rows+=("| $1: every request accounted for | $rc | 0 |")
    [ "$rc" -eq 0 ] || failed=1
}

step device 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv && nvidia-smi'

for t in cuda_host cuda_elem cuda_gemm cuda_attn cuda_model; do
    if ! step "$t" 300 "$build/tests/test_$t" && command -v compute-sanitizer >/dev/null; then
        step "$t.memcheck" 300 compute-sanitizer --tool memcheck "$build/tests/test_$t"
    fi
done

step cuda_generate 300 "$py" "$root/tests/cuda_generate.py" "$cz"
step hf_reference_cuda 300 "$py" "$root/tests/hf_reference.py" "$cz" --backend cuda

cpu=$root/experiments/engine/cpu.json
step replay_cpu_json 240 bash -c "
    '$cz' replay '$cpu' --backend cuda --no-progress --summary '$out/replay.json' &&
    '$cz' sim '$cpu' --quiet --summary '$out/replay_sim.json' &&
    grep -q '\"kernel_backend\":[[:space:]]*\"cuda\"' '$out/replay.json'"
accounted replay_cpu_json "$out/replay.json" 40
for k in completed generated_tokens; do
    a=$(grep -o "\"$k\":[[:space:]]*[0-9]*" "$out/replay.json" | head -1 | grep -o '[0-9]*$')
    b=$(grep -o "\"$k\":[[:space:]]*[0-9]*" "$out/replay_sim.json" | head -1 | grep -o '[0-9]*$')
    echo "$k: engine on CUDA ${a:-?}, simulator ${b:-?}" | tee -a "$out/steps.log"
    [ -n "$a" ] && [ "$a" = "$b" ] || { rows+=("| replay $k = simulator's | 1 | 0 |"); failed=1; }
done
step replay_omni 300 "$cz" replay "$root/experiments/engine/omni_barge_in.json" --backend cuda \
    --no-progress --summary "$out/omni.json"
accounted replay_omni "$out/omni.json" 12
step replay_nova 300 "$cz" replay "$root/experiments/engine/nova_cpu.json" --backend cuda \
    --no-progress --summary "$out/nova.json"
accounted replay_nova "$out/nova.json" 60

step bench_cuda 420 "$build/tests/bench_cuda"

step profile 300 "$cz" profile "$cpu" --backend cuda --no-progress -o "$out/profile.h5"
step calibrate 60 "$cz" calibrate "$out/profile.h5" -o "$out/cost.json"
step validate 400 "$cz" validate "$cpu" --backend cuda --cost "$out/cost.json" \
    --set workload.window.start_s=900 --no-progress --summary "$out/validate.json"

echo
echo "| step | exit | s |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $failed
