#!/usr/bin/env bash
# tests/mpi.sh CADENZA SOURCE_ROOT HAS_MPI - `mpirun -n 2 cadenza sweep` (docs/config.md):
# the same output bytes as one process, with and without seeds, every rank taking points,
# --resume under MPI, and a failing point that ends every rank with no output. Skips (77)
# when the build has no MPI (HAS_MPI is not "mpi") or mpirun is missing. Prints
# "N passed, N failed".
set -u
cz=$1
root=$2
if [ "${3:-}" != mpi ] || ! command -v mpirun >/dev/null 2>&1; then
    echo "skip: this build has no MPI (meson -Dmpi) or mpirun is missing"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
# As root (CI containers) Open MPI wants both variables; --oversubscribe lets 3 ranks
# share fewer cores. Under AddressSanitizer the leak check is off for these runs only:
# Open MPI keeps allocations from MPI_Init to exit that LeakSanitizer reports as leaks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mpi() { # ranks, cadenza arguments...
    local n=$1
    shift
    mpirun --oversubscribe -n "$n" "$cz" "$@"
}

cat >"$tmp/sw.json" <<JSON
{"name": "mm1", "base": "$root/experiments/validation/mm1_rho0.5.json",
 "grid": {"workload.arrivals.rate_rps": [0.3, 0.5, 0.7], "server.max_num_seqs": [1, 2]},
 "report": ["completed", "mean_e2el_ms"]}
JSON
set_n="--set workload.synthetic.requests=2000"
"$cz" sweep "$tmp/sw.json" $set_n --quiet -o "$tmp/one.jsonl"
"$cz" sweep "$tmp/sw.json" $set_n --quiet --seeds 2 -o "$tmp/one_s.jsonl"

check "mpirun -n 2: every row byte-identical to one process's, in grid order" bash -c \
    "$(declare -f mpi); cz='$cz'; mpi 2 sweep '$tmp/sw.json' $set_n -o '$tmp/two.jsonl' >'$tmp/two.out' 2>'$tmp/two.err' &&
     cmp <(sort '$tmp/one.jsonl') <(sort '$tmp/two.jsonl') && cmp '$tmp/one.jsonl' '$tmp/two.jsonl' &&
     grep -q '6 points on 2 ranks' '$tmp/two.out' && [ \$(grep -c '^sweep: point' '$tmp/two.err') -eq 6 ] &&
     grep -q '(rank 1)' '$tmp/two.err' && [ ! -e '$tmp/two.jsonl.partial' ]"
check "only rank 0 prints the table" bash -c \
    "[ \$(grep -c 'workload.arrivals.rate_rps' '$tmp/two.out') -eq 1 ]"
check "mpirun -n 3 with seeds: the same bytes" bash -c \
    "$(declare -f mpi); cz='$cz'; mpi 3 sweep '$tmp/sw.json' $set_n --quiet --seeds 2 -o '$tmp/three_s.jsonl' &&
     cmp '$tmp/one_s.jsonl' '$tmp/three_s.jsonl'"

sed -n '1p;2p;4p' "$tmp/one.jsonl" >"$tmp/r.jsonl"
sed -n 5p "$tmp/one.jsonl" >"$tmp/r.jsonl.partial"
sed -n 6p "$tmp/one.jsonl" | head -c 150 >>"$tmp/r.jsonl.partial"
check "--resume under mpirun runs only the missing points 3 and 6, the same bytes" bash -c \
    "$(declare -f mpi); cz='$cz'; mpi 2 sweep '$tmp/sw.json' $set_n -o '$tmp/r.jsonl' --resume >/dev/null 2>'$tmp/r.err' &&
     [ \$(grep -c '^sweep: point' '$tmp/r.err') -eq 2 ] && grep -q '^sweep: point 3/6 ' '$tmp/r.err' &&
     grep -q '^sweep: point 6/6 ' '$tmp/r.err' && grep -q 'r.jsonl.partial:2: not a complete JSON row' '$tmp/r.err' &&
     cmp '$tmp/one.jsonl' '$tmp/r.jsonl' && [ ! -e '$tmp/r.jsonl.partial' ]"

sed 's/\[1, 2\]/[1, "x"]/' "$tmp/sw.json" >"$tmp/bad.json"
# each rank's exit status recorded by a wrapper that itself exits 0, so mpirun ends no rank
check "a failing point ends every rank non-zero, with no output and no partial file" bash -c \
    "mpirun --oversubscribe -n 2 sh -c '\"\$0\" \"\$@\"; echo \$? >$tmp/rc.\$OMPI_COMM_WORLD_RANK' \
        '$cz' sweep '$tmp/bad.json' $set_n --quiet -o '$tmp/bad.jsonl' >/dev/null 2>'$tmp/bad.err' &&
     [ \$(cat '$tmp/rc.0') -eq 2 ] && [ \$(cat '$tmp/rc.1') -eq 2 ] && grep -q 'bad.json (point 2)' '$tmp/bad.err' && [ ! -e '$tmp/bad.jsonl' ] &&
     [ ! -e '$tmp/bad.jsonl.partial' ] && ! ls '$tmp' | grep -q 'bad.jsonl.tmp'"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
