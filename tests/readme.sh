#!/usr/bin/env bash
# tests/readme.sh CADENZA SOURCE_ROOT - the README's "Using it" examples run as written:
# each command of the block, from a scratch folder laid out as the repository (build/cli/
# cadenza, experiments/, traces/), exits 0. `path/to/hf-checkpoint` is a checkpoint folder
# written here (a config.json of Llama-3-8B's shape); the decoder run of a real checkpoint
# (`generate --model path/to/...`) needs weights and is left to tests/hf_reference. The
# sweeps and `figures` run whole in tests/golden.sh and tests/plots.sh; here their command
# lines are checked to name files that exist and flags the command takes (`--help` of the
# command lists each flag used). And the papers are cited by title. Prints "N passed,
# N failed".
set -u
cz=$(realpath "$1")
root=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

mkdir -p "$tmp/build/cli" "$tmp/path/to/hf-checkpoint"
ln -s "$cz" "$tmp/build/cli/cadenza"
ln -s "$root/experiments" "$tmp/experiments"
ln -s "$root/traces" "$tmp/traces"
cat >"$tmp/path/to/hf-checkpoint/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
 "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
 "num_attention_heads": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
 "rope_theta": 500000.0, "max_position_embeddings": 8192, "tie_word_embeddings": false}
JSON

# the block's commands, continuation lines joined, comments dropped
awk '/^## Using it/ { f = 1 } f && /^```sh/ { g = 1; next } g && /^```/ { exit } g' \
    "$root/README.md" | sed 's/  *#.*$//' |
    awk '{ if (sub(/\\$/, "")) { line = line $0 } else { print line $0; line = "" } }' |
    grep -v '^[[:space:]]*$' >"$tmp/cmds"
[ -s "$tmp/cmds" ] || { echo "FAIL: no commands found in the README's Using it block"; exit 1; }

# a sweep, figures, or a plot of a sweep's rows: the files exist and the flags are known
check_cheap() { # command line
    local sub
    sub=$(echo "$1" | awk '{ print $2 }')
    for w in $1; do
        case $w in
        experiments/*) [ -e "$tmp/$w" ] || { echo "no file $w"; return 1; } ;;
        --*) "$cz" "$sub" --help | grep -q -- "$w" || { echo "$sub takes no $w"; return 1; } ;;
        esac
    done
}

while IFS= read -r cmd; do
    case $cmd in
    *"generate --model path/to/"*) continue ;;
    *" sweep "* | *" figures "* | *"plot points.jsonl"*)
        check "README (files and flags): $cmd" check_cheap "$cmd" ;;
    *) check "README: $cmd" bash -c "cd '$tmp' && $cmd >/dev/null 2>'$tmp/err' || { cat '$tmp/err'; exit 1; }" ;;
    esac
done <"$tmp/cmds"

# papers are cited by title (docs/references.md), never by a file name a user does not have
check "no citation by an internal file name" bash -c \
    "! grep -rIlE '[0-9]{3}_[0-9a-f]{16}(\.txt)?' '$root' --include='*.c' --include='*.h' --include='*.cu' \
        --include='*.md' --include='*.json' --include='*.py' --include='*.sh' --exclude-dir='build*' \
        --exclude-dir=.git --exclude-dir=node_modules"
check "docs/references.md lists the five papers by title" bash -c \
    "for t in 'LiveServe: Interaction-Aware' 'VoxServe: Streaming-Centric' 'Metronome: Bound the Cache' \
        'Efficient LLM Serving on Hybrid Real-time and Best-effort Requests' 'Nova: Real-Time Agentic'; do
        grep -qF \"\$t\" '$root/docs/references.md' || { echo \"missing: \$t\"; exit 1; }; done"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
