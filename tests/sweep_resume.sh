#!/usr/bin/env bash
# tests/sweep_resume.sh CADENZA SOURCE_ROOT - `cadenza sweep` as one process: the partial
# file, --resume (rows kept, only the missing points run, a cut last line run again, the
# same bytes as a whole run), errors that leave no output, and a launcher's copies refused
# (docs/config.md). Prints "N passed, N failed".
set -u
cz=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
# the launcher's variables must not leak in from a CI job run under one
unset OMPI_COMM_WORLD_SIZE PMI_SIZE PMIX_RANK SLURM_STEP_NUM_TASKS

cat >"$tmp/sw.json" <<JSON
{"name": "mm1", "base": "$root/experiments/validation/mm1_rho0.5.json",
 "grid": {"workload.arrivals.rate_rps": [0.3, 0.5, 0.7], "server.max_num_seqs": [1, 2]},
 "report": ["completed", "mean_e2el_ms"]}
JSON
sweep() { "$cz" sweep "$tmp/sw.json" --set workload.synthetic.requests=2000 "$@"; }
ran() { grep -c '^sweep: point .* done in' "$1"; } # runs a stderr file reports

check "a whole run: six rows, no partial file left" bash -c \
    "$(declare -f sweep); cz='$cz' tmp='$tmp'; sweep --quiet -o '$tmp/a.jsonl' &&
     [ \$(wc -l <'$tmp/a.jsonl') -eq 6 ] && [ ! -e '$tmp/a.jsonl.partial' ]"

sed -n '1p;3p;4p;6p' "$tmp/a.jsonl" >"$tmp/b.jsonl"
check "--resume runs only the two missing points and gives the same bytes" bash -c \
    "$(declare -f sweep ran); cz='$cz' tmp='$tmp'; sweep -o '$tmp/b.jsonl' --resume >/dev/null 2>'$tmp/b.err' &&
     [ \$(ran '$tmp/b.err') -eq 2 ] && grep -q '^sweep: point 2/6 ' '$tmp/b.err' &&
     grep -q '^sweep: point 5/6 ' '$tmp/b.err' && grep -q '4 of 6 points kept' '$tmp/b.err' &&
     cmp '$tmp/a.jsonl' '$tmp/b.jsonl'"

head -n 5 "$tmp/a.jsonl" >"$tmp/c.jsonl"
sed -n 6p "$tmp/a.jsonl" | head -c 200 >>"$tmp/c.jsonl"
check "a cut last line is dropped with a note and its point runs again" bash -c \
    "$(declare -f sweep ran); cz='$cz' tmp='$tmp'; sweep -o '$tmp/c.jsonl' --resume >/dev/null 2>'$tmp/c.err' &&
     [ \$(ran '$tmp/c.err') -eq 1 ] && grep -q '^sweep: point 6/6 ' '$tmp/c.err' &&
     grep -q 'c.jsonl:6: not a complete JSON row' '$tmp/c.err' && cmp '$tmp/a.jsonl' '$tmp/c.jsonl'"

# what an interrupted run leaves: no output, its finished rows in the partial file (the
# last one cut by the kill)
head -n 3 "$tmp/a.jsonl" >"$tmp/d.jsonl.partial"
sed -n 4p "$tmp/a.jsonl" | head -c 100 >>"$tmp/d.jsonl.partial"
check "--resume completes an interrupted run from its partial file, then removes it" bash -c \
    "$(declare -f sweep ran); cz='$cz' tmp='$tmp'; sweep -o '$tmp/d.jsonl' --resume >/dev/null 2>'$tmp/d.err' &&
     [ \$(ran '$tmp/d.err') -eq 3 ] && cmp '$tmp/a.jsonl' '$tmp/d.jsonl' && [ ! -e '$tmp/d.jsonl.partial' ]"

check "--resume of a complete output runs nothing and keeps its bytes" bash -c \
    "$(declare -f sweep ran); cz='$cz' tmp='$tmp'; sweep -o '$tmp/d.jsonl' --resume >/dev/null 2>'$tmp/e.err' &&
     [ \$(ran '$tmp/e.err') -eq 0 ] && cmp '$tmp/a.jsonl' '$tmp/d.jsonl'"

# a run that fails at its last point (a clock past its limit: found only by running it)
# keeps the rows finished before, as they finished; a resumed run that fails keeps the rows
# it kept
cat >"$tmp/sw3.json" <<JSON
{"name": "mm1t", "base": "$root/experiments/validation/mm1_rho0.5.json",
 "grid": {"workload.arrivals.rate_rps": [1e-9], "workload.time_scale": [1, 2, 1e9]},
 "report": ["completed", "mean_e2el_ms"]}
JSON
check "rows reach the partial file as their points finish; a failure keeps them" bash -c \
    "'$cz' sweep '$tmp/sw3.json' --quiet --set workload.synthetic.requests=3 -o '$tmp/p.jsonl' 2>'$tmp/p.err';
     [ \$? -eq 2 ] && grep -q 'would pass 1e+15 s' '$tmp/p.err' && [ ! -e '$tmp/p.jsonl' ] &&
     [ \$(wc -l <'$tmp/p.jsonl.partial') -eq 2 ] && grep -q -- '--resume' '$tmp/p.err' &&
     cp '$tmp/p.jsonl.partial' '$tmp/p.kept'"
check "... and a resumed run that fails again keeps the rows it kept" bash -c \
    "'$cz' sweep '$tmp/sw3.json' --quiet --set workload.synthetic.requests=3 -o '$tmp/p.jsonl' --resume 2>'$tmp/p2.err';
     [ \$? -eq 2 ] && cmp '$tmp/p.jsonl.partial' '$tmp/p.kept' && [ ! -e '$tmp/p.jsonl' ]"

sed 's/"mm1"/"other"/' "$tmp/a.jsonl" >"$tmp/f.jsonl"
cp "$tmp/f.jsonl" "$tmp/f.orig"
check "--resume of another sweep's rows exits 2 naming the line, the file untouched" bash -c \
    "$(declare -f sweep); cz='$cz' tmp='$tmp'; sweep --quiet -o '$tmp/f.jsonl' --resume 2>'$tmp/f.err';
     [ \$? -eq 2 ] && grep -q 'f.jsonl:1: a row of sweep .other.' '$tmp/f.err' &&
     cmp '$tmp/f.jsonl' '$tmp/f.orig' && [ ! -e '$tmp/f.jsonl.partial' ]"

check "a bad grid value exits 2 with no output and no partial file" bash -c \
    "sed 's/\\[1, 2\\]/[1, \"x\"]/' '$tmp/sw.json' >'$tmp/bad.json' &&
     '$cz' sweep '$tmp/bad.json' --quiet --set workload.synthetic.requests=2000 -o '$tmp/g.jsonl' 2>'$tmp/g.err';
     [ \$? -eq 2 ] && grep -q 'bad.json (point 2)' '$tmp/g.err' && [ ! -e '$tmp/g.jsonl' ] &&
     [ ! -e '$tmp/g.jsonl.partial' ]"

check "--resume without -o is a usage error" bash -c \
    "'$cz' sweep '$tmp/sw.json' --resume 2>'$tmp/h.err'; [ \$? -eq 2 ] && grep -q -- '--resume' '$tmp/h.err'"

check "with seeds: --resume reruns the missing point, and rows of other seeds" bash -c \
    "$(declare -f sweep ran); cz='$cz' tmp='$tmp'; sweep --quiet --seeds 2 -o '$tmp/s.jsonl' &&
     sed 3d '$tmp/s.jsonl' >'$tmp/s2.jsonl' && sweep --seeds 2 -o '$tmp/s2.jsonl' --resume >/dev/null 2>'$tmp/s.err' &&
     [ \$(ran '$tmp/s.err') -eq 2 ] && cmp '$tmp/s.jsonl' '$tmp/s2.jsonl' &&
     sweep --seeds 3 -o '$tmp/s2.jsonl' --resume >/dev/null 2>'$tmp/s3.err' &&
     [ \$(ran '$tmp/s3.err') -eq 18 ] && [ \$(grep -c 'run with other seeds' '$tmp/s3.err') -eq 6 ]"

# a launcher's copies: a build without MPI refuses them; a build with MPI refuses a
# launcher whose copies MPI sees alone (no leak check: MPI_Init's allocations live on)
check "started as one of 2 copies that cannot join: exit 2, no output" bash -c \
    "OMPI_COMM_WORLD_SIZE=2 ASAN_OPTIONS=\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}detect_leaks=0 \
        '$cz' sweep '$tmp/sw.json' --quiet -o '$tmp/m.jsonl' 2>'$tmp/m.err';
     [ \$? -eq 2 ] && grep -q 'started as one of 2 processes' '$tmp/m.err' && [ ! -e '$tmp/m.jsonl' ]"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
