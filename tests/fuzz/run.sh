#!/usr/bin/env bash
# Runs every libFuzzer harness of a -Dfuzz=enabled build for SECONDS each, on a scratch
# copy of its corpus (tests/fuzz/corpus/<name>/, so the repository's corpus never grows),
# with its dictionary (tests/fuzz/dict/: traces.dict for the readers, config.dict, set.dict,
# safetensors.dict, oai.dict (also sse's), tokenizer.dict),
# a 10 s limit per input and a 2 GiB memory limit. Prints one line per harness: executions, executions per second and
# the result. A crash, sanitizer report, leak, timeout or out-of-memory is a failure: the
# reproducer is kept under ARTIFACTS/<name>/ (default BUILD_DIR/fuzz-artifacts) with the
# log, and its path and first error lines are printed. Exits non-zero when any harness
# failed or did not run; the last line reads "N passed, N failed".
#
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS [NAME...]      (docs/testing.md)
#   NAME: sharegpt burstgpt azure mooncake cadenza trace_auto config set sim safetensors oai
#         tokenizer sse (default all)
#   CZ_FUZZ_ARTIFACTS=DIR  where reproducers and logs go
#   CZ_FUZZ_RSS_MB=N       memory limit per harness in MiB (default 2048)
set -u
if [ $# -lt 2 ] || ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 BUILD_DIR SECONDS [NAME...]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd) || exit 2
seconds=$2
shift 2
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    names=(sharegpt burstgpt azure mooncake cadenza trace_auto config set sim safetensors oai
           tokenizer sse)
fi
artifacts=${CZ_FUZZ_ARTIFACTS:-$build/fuzz-artifacts}
rss_mb=${CZ_FUZZ_RSS_MB:-2048}
scratch_root=${TMPDIR:-/tmp}
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
    scratch_root=/dev/shm
fi
scratch=$(mktemp -d "$scratch_root/cz-fuzz.XXXXXX") || exit 2
trap 'rm -rf "$scratch"' EXIT

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

passed=0
failed=0
for name in "${names[@]}"; do
    exe=$build/tests/fuzz/fuzz_$name
    if [ ! -x "$exe" ]; then
        echo "fuzz_$name: FAIL: $exe not built (configure with CC=clang -Dfuzz=enabled)"
        failed=$((failed + 1))
        continue
    fi
    if [ ! -d "$here/corpus/$name" ]; then
        echo "fuzz_$name: FAIL: no corpus $here/corpus/$name"
        failed=$((failed + 1))
        continue
    fi
    out=$artifacts/$name
    rm -rf "$out"
    mkdir -p "$out" "$scratch/$name/tmp"
    cp -R "$here/corpus/$name" "$scratch/$name/corpus"
    case $name in
        config | sim) dict=config ;;
        set) dict=set ;;
        safetensors) dict=safetensors ;;
        oai | sse) dict=oai ;;
        tokenizer) dict=tokenizer ;;
        *) dict=traces ;;
    esac
    dict=("-dict=$here/dict/$dict.dict")
    log=$out/fuzz_$name.log
    # the harness's scratch files go to its own folder (TMPDIR), removed with the rest
    TMPDIR=$scratch/$name/tmp timeout -k 10 $((seconds + 120)) "$exe" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb="$rss_mb" \
        -malloc_limit_mb="$rss_mb" -print_final_stats=1 -artifact_prefix="$out/" \
        "${dict[@]}" "$scratch/$name/corpus" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    if [ -z "$execs" ]; then # libFuzzer prints no final stats after a crash
        execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    fi
    stats="${execs:-0} executions, ${rate:-?} exec/s"
    repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -z "$repro" ]; then
        echo "fuzz_$name: ok: $stats in ${seconds} s"
        passed=$((passed + 1))
        continue
    fi
    failed=$((failed + 1))
    what=$(grep -m 1 -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|runtime error:|^fuzz: |assertion failed' "$log")
    [ "$rc" -eq 124 ] && what="harness ran past $((seconds + 120)) s"
    echo "fuzz_$name: FAIL (exit $rc): $stats: ${what:-see the log}"
    # the error lines, then the top of the stack below the sanitizer, libFuzzer and libc
    grep -m 3 -E '^[^ ].*(assertion failed|runtime error:)|^fuzz: |^SUMMARY:' "$log" |
        cut -c 1-600 | sed 's/^/    /'
    grep -E '^ *#[0-9]+ 0x' "$log" |
        grep -v -E ' in (__sanitizer|__asan|__ubsan|__interceptor|fuzzer::|abort|raise|__pthread|__libc|_start|main )|libc\.so|cz_fuzz_fail' |
        head -n 6 | sed 's/^ */      /'
    if [ -n "$repro" ]; then
        echo "    reproducer: $repro"
        echo "    rerun: $exe $repro"
    fi
    echo "    log: $log"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
