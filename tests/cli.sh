#!/usr/bin/env bash
# tests/cli.sh CADENZA SOURCE_ROOT - the command line as a user meets it: help, version,
# exit codes, error messages that name the file and field, no partial output on error,
# byte-identical summaries for the same seed, and a sweep. Prints "N passed, N failed".
set -u
cz=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
check() { # description, then a command that must succeed
    local what=$1
    shift
    if "$@" >"$tmp/out" 2>"$tmp/err"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $what"
        sed 's/^/  /' "$tmp/out" "$tmp/err" | head -20
    fi
}
expect_exit() { # code, command...
    local want=$1
    shift
    "$@" >"$tmp/cmd.out" 2>"$tmp/cmd.err"
    [ $? -eq "$want" ]
}

check "--help exits 0" "$cz" --help
check "--version prints the version" bash -c "'$cz' --version | grep -q '^cadenza '"
check "sim --help" "$cz" sim --help
check "sweep --help" "$cz" sweep --help
check "trace --help" "$cz" trace --help
check "no command is a usage error" expect_exit 2 "$cz"
check "unknown option is a usage error" expect_exit 2 "$cz" sim --bogus
check "unknown command is a usage error" expect_exit 2 "$cz" frobnicate

cat >"$tmp/bad.json" <<'JSON'
{"workload": {"synthetic": {"requests": 10, "input_tokens": 5, "output_tokens": 5},
              "arrivals": {"process": "poisson", "rate_rps": 1}},
 "server": {"max_num_seqs": 0}}
JSON
check "a bad config exits 2" expect_exit 2 "$cz" sim "$tmp/bad.json" -o "$tmp/r.h5" --summary "$tmp/s.json"
check "the message names the file and the field" \
    bash -c "grep -q 'bad.json' '$tmp/cmd.err' && grep -q 'max_num_seqs' '$tmp/cmd.err'"
check "no partial output after an error" bash -c "[ ! -e '$tmp/r.h5' ] && [ ! -e '$tmp/s.json' ]"
check "a bad trace names file, line and field" bash -c \
    "'$cz' trace info '$root/tests/data/traces/burstgpt_bad_number.csv' 2>&1 >/dev/null | grep -q 'burstgpt_bad_number.csv:3: field .Request tokens.'"

cfg="$root/experiments/default.json"
check "same config and seed: byte-identical summary" bash -c \
    "'$cz' sim '$cfg' --quiet --set workload.max_requests=300 --summary '$tmp/a.json' &&
     '$cz' sim '$cfg' --quiet --set workload.max_requests=300 --summary '$tmp/b.json' &&
     cmp '$tmp/a.json' '$tmp/b.json'"
check "results file written" bash -c \
    "'$cz' sim '$cfg' --quiet --set workload.max_requests=100 -o '$tmp/r.h5' && [ -s '$tmp/r.h5' ]"
check "trace info --json has the documented keys" bash -c \
    "'$cz' trace info '$root/traces/data/burstgpt3/BurstGPT_3_head.csv' --json > '$tmp/i.json' &&
     for k in requests sessions turns_max dropped_failed duration_s mean_rate_rps input_tokens_p50 output_tokens_p50; do grep -q \"\\\"\$k\\\"\" '$tmp/i.json' || exit 1; done"

vlm="$root/experiments/nova/vlm.json"
check "a cross-stage run is deterministic and reports Nova's figures" bash -c \
    "'$cz' sim '$vlm' --quiet --set workload.synthetic.requests=60 --summary '$tmp/n1.json' &&
     '$cz' sim '$vlm' --quiet --set workload.synthetic.requests=60 --summary '$tmp/n2.json' &&
     cmp '$tmp/n1.json' '$tmp/n2.json' && grep -q '\"mean_vision_queue_ms\"' '$tmp/n1.json' &&
     grep -q '\"max_e2el_ms\"' '$tmp/n1.json'"
check "a bad cross-stage parameter exits 2 naming the field" bash -c \
    "'$cz' sim '$vlm' --quiet --set 'scheduler={\"name\": \"pf_limit\", \"decode_threshold\": -1}' \
        2>&1 >/dev/null | grep -q 'decode_threshold'; [ \${PIPESTATUS[0]} -eq 2 ]"

cat >"$tmp/sweep.json" <<JSON
{"name": "t", "base": "$cfg", "grid": {"server.max_num_seqs": [8, 64]},
 "report": ["completed", "p90_ttft_ms"]}
JSON
check "sweep runs every point" bash -c \
    "'$cz' sweep '$tmp/sweep.json' --set workload.max_requests=200 -o '$tmp/sw.jsonl' >/dev/null &&
     [ \$(wc -l < '$tmp/sw.jsonl') -eq 2 ]"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
