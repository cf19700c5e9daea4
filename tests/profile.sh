#!/usr/bin/env bash
# tests/profile.sh CADENZA H5TABLE SOURCE_ROOT - `cadenza profile`: a quick profile of the
# CPU engine's config (experiments/engine/cpu.json) whose /shapes holds every decoder class
# with positive medians between their 10th and 90th percentiles beside the cost model's
# prediction, whose /transfers holds both directions, whose attributes describe the machine
# and the model; the omni pipeline's encoder, vocoder and code predictor; bad flags and
# configs exit 2 and leave no file. Prints "N passed, N failed".
set -u
cz=$1
h5=$2
root=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
# An awk program over a table (tab-separated, a header of field names), with $c["field"]
# the field's value in a row.
table_awk() { # file table program
    "$h5" "$1" "$2" | awk -F'\t' "NR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next } $3"
}
count_where() { # file table condition: rows for which it holds (empty if awk fails)
    table_awk "$1" "$2" "($3) { n++ } END { print n + 0 }"
}
field_values() { # file table field: its distinct values, sorted, on one line
    table_awk "$1" "$2" "{ print \$c[\"$3\"] }" | sort -u | tr '\n' ' '
}
attr() { # file name: a root attribute's value
    "$h5" "$1" --attrs | awk -F'\t' -v k="$2" '$1 == k { print $2 }'
}
describes() { # file table: a description, units for every column, "s" just for *_s ones
    "$h5" "$1" "$2" --units | awk -F'\t' '
        NR == 1 { ok = $1 == "description" && length($2) > 20; next }
        { n++; if (($1 ~ /_s$/) != ($2 == "s")) ok = 0 }
        END { exit !(ok && n > 10) }'
}
is() { # want got
    [ "$1" = "$2" ] || { echo "expected '$1', got '$2'"; false; }
}
at_least() { # n got
    [ "$2" -ge "$1" ] || { echo "expected at least $1, got $2"; false; }
}

cpu="$root/experiments/engine/cpu.json"
check "profile --help" bash -c "'$cz' profile --help | grep -q -- '--quick'"
check "the command list names profile" bash -c "'$cz' --help | grep -q '^  profile '"

# Under the sanitizers (unoptimised kernels, ten times slower) the CPU engine's grid follows
# a 512-token step budget: the same classes and checks, a fifth of the shapes' tokens.
small=()
[ "${CZ_TEST_SANITIZED:-0}" = 1 ] && small=(--set server.max_num_batched_tokens=512)

# a quick profile: under a minute on 2 cores (about 10 s)
check "a quick profile of the CPU engine" "$cz" profile "$cpu" --quick -o "$tmp/p.h5" \
    "${small[@]}" --no-progress
cp "$tmp/err" "$tmp/p.err"
check "no progress line with --no-progress" test ! -s "$tmp/p.err"
p="$tmp/p.h5"
check "/shapes has prefill, decode and mixed rows" is "decode mixed prefill " \
    "$(field_values "$p" shapes class)"
for cls in prefill decode mixed; do
    check "at least 8 $cls shapes" at_least 8 \
        "$(count_where "$p" shapes "\$c[\"class\"] == \"$cls\"")"
done
check "every median is positive, between p10 and p90, of 3 repeats" is 0 \
    "$(count_where "$p" shapes '!($c["median_s"] > 0 && $c["p10_s"] <= $c["median_s"] &&
        $c["median_s"] <= $c["p90_s"] && $c["repeats"] == 3 && $c["predicted_s"] > 0)')"
check "the pass alone is positive and within its hand-over-to-report time" is 0 \
    "$(count_where "$p" shapes '!($c["device_median_s"] > 0 && $c["device_median_s"] <= $c["median_s"])')"
check "the shape fields are the cost model's" is 0 \
    "$(count_where "$p" shapes '$c["prefill_attn_ctx"] != $c["chunk_tokens"] * ($c["prefix_tokens"] + ($c["chunk_tokens"] + 1) / 2) ||
        $c["decode_ctx_tokens"] != $c["decode_seqs"] * $c["ctx_tokens"] ||
        $c["prefill_tokens"] != $c["chunk_tokens"] ||
        $c["prefill_seqs"] != ($c["chunk_tokens"] > 0)')"
check "mixed shapes hold decodes and a chunk" is 0 \
    "$(count_where "$p" shapes '$c["class"] == "mixed" &&
        !($c["decode_seqs"] > 0 && $c["prefill_seqs"] == 1)')"
check "the shape columns carry /steps' names" bash -c \
    "'$h5' '$p' shapes | head -1 | tr '\t' '\n' | grep -cxE 'prefill_tokens|prefill_seqs|prefill_attn_ctx|decode_seqs|decode_ctx_tokens|stage' | grep -qx 6"
for t in shapes transfers; do
    check "/$t describes itself: a description, and seconds exactly for the *_s columns" \
        describes "$p" "$t"
done
check "/shapes' codes read as names" is "llm ar" \
    "$(table_awk "$p" shapes '{ print $c["stage"], $c["kind"] }' | sort -u)"
check "/transfers' contiguous ranges name no stage" is 0 \
    "$(count_where "$p" transfers '($c["blocks"] == 0) != ($c["stage"] == "contiguous")')"
check "/transfers has copies both ways" is "0 1 " "$(field_values "$p" transfers to_host)"
check "/transfers has contiguous ranges and whole blocks" is 0 \
    "$(count_where "$p" transfers '!($c["median_s"] > 0 && $c["p10_s"] <= $c["median_s"] &&
        $c["median_s"] <= $c["p90_s"] && $c["bytes"] > 0 &&
        ($c["blocks"] == 0) == ($c["copies"] == 1))')"
check "at least 4 contiguous copies" at_least 4 \
    "$(count_where "$p" transfers '$c["blocks"] == 0')"
check "at least 4 whole-block copies" at_least 4 "$(count_where "$p" transfers '$c["blocks"] > 0')"
for a in cpu_model online_cpus backend threads model stage_names stage_kinds dtype kv_dtype \
         weights cadenza_version config_path config quick repeats; do
    check "attribute $a" test -n "$(attr "$p" $a)"
done
check "the model" is tiny-llama "$(attr "$p" model)"
check "the backend" is cpu "$(attr "$p" backend)"
check "the stage" is "llm ar" "$(attr "$p" stage_names) $(attr "$p" stage_kinds)"
check "the types" is "bf16 bf16" "$(attr "$p" dtype) $(attr "$p" kv_dtype)"
check "the config path" is "$cpu" "$(attr "$p" config_path)"
check "quick" is 1 "$(attr "$p" quick)"
check "the version" is "$("$cz" --version | sed 's/^cadenza //')" "$(attr "$p" cadenza_version)"

"$cz" profile "$cpu" --quick --threads 1 --repeats 1 "${small[@]}" -o "$tmp/t.h5" >"$tmp/t.out" 2>"$tmp/t.err"
check "a profile on one thread with one repeat" test $? -eq 0
check "--threads is honoured" is 1 "$(attr "$tmp/t.h5" threads)"
check "--repeats is honoured" is 0 "$(count_where "$tmp/t.h5" shapes '$c["repeats"] != 1')"
check "a progress line on stderr" grep -q '^profile llm .* passes' "$tmp/t.err"
check "a summary line per stage and class" grep -Eq '^  llm +decode ' "$tmp/t.out"

# every stage kind: the omni pipeline (encoder, MoE decoders, a code predictor, a vocoder)
omni="$root/experiments/engine/omni_barge_in.json"
check "a quick profile of the omni pipeline" "$cz" profile "$omni" --quick --repeats 1 \
    -o "$tmp/o.h5" --no-progress
check "its classes" is "decode encoder inner mixed prefill vocoder " \
    "$(field_values "$tmp/o.h5" shapes class)"
check "its stages" is "audio_encoder,thinker,talker,code2wav" "$(attr "$tmp/o.h5" stage_names)"

# bad input: exit 2, a message naming the flag or file, no output
check "no config is a usage error" expect_exit 2 "$cz" profile -o "$tmp/x.h5"
check "no output is a usage error" expect_exit 2 "$cz" profile "$cpu"
check "the message asks for -o" grep -q -- "-o" "$tmp/cmd.err"
check "an unknown option is a usage error" expect_exit 2 "$cz" profile "$cpu" -o "$tmp/x.h5" --bogus
check "the message names it" grep -q -- "--bogus" "$tmp/cmd.err"
check "a bad backend is a usage error" expect_exit 2 "$cz" profile "$cpu" -o "$tmp/x.h5" --backend tpu
check "a bad thread count is a usage error" expect_exit 2 "$cz" profile "$cpu" -o "$tmp/x.h5" --threads 0
check "a bad repeat count is a usage error" expect_exit 2 "$cz" profile "$cpu" -o "$tmp/x.h5" --repeats x
check "the message names the flag" grep -q -- "--repeats" "$tmp/cmd.err"
check "a missing value is a usage error" expect_exit 2 "$cz" profile "$cpu" -o "$tmp/x.h5" --repeats
echo '{"model": "tiny-llama", "server": {' >"$tmp/bad.json"
check "a malformed config is an input error" expect_exit 2 "$cz" profile "$tmp/bad.json" \
    -o "$tmp/x.h5"
check "the message names the file" grep -q "bad.json" "$tmp/cmd.err"
check "a missing config is an input error (exit 2, as sim)" expect_exit 2 "$cz" profile \
    "$tmp/none.json" -o "$tmp/x.h5"
check "the message names the argument and the file" \
    grep -qF "config argument: cannot open '$tmp/none.json'" "$tmp/cmd.err"
check "a bad --set is blamed" expect_exit 2 "$cz" profile "$cpu" -o "$tmp/x.h5" \
    --set server.max_num_seqs=0
check "the message names the --set" grep -q -- "--set server.max_num_seqs=0" "$tmp/cmd.err"
check "a missing checkpoint names the folder" expect_exit 2 "$cz" profile "$cpu" \
    -o "$tmp/x.h5" --set engine.weights=/nonexistent-ckpt --quick
check "the message names it" grep -q nonexistent-ckpt "$tmp/cmd.err"
check "no output after an error" bash -c "[ ! -e '$tmp/x.h5' ] && ! ls '$tmp' | grep -q '\.tmp'"
check "an unwritable output fails before the run (exit 1)" expect_exit 1 "$cz" profile "$cpu" \
    --quick -o /nonexistent-dir/p.h5
check "--backend cuda runs on a device or says why not" bash -c "
    '$cz' profile '$cpu' --quick --repeats 1 --backend cuda --no-progress -o '$tmp/cu.h5' \
        >/dev/null 2>'$tmp/cu.err'
    case \$? in
    0) [ \"\$('$h5' '$tmp/cu.h5' --attrs | awk -F'\t' '\$1 == \"backend\" { print \$2 }')\" = cuda ] ;;
    1) grep -q \"backend 'cuda'\" '$tmp/cu.err' && [ ! -e '$tmp/cu.h5' ] ;;
    *) false ;;
    esac"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
