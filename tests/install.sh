#!/usr/bin/env bash
# tests/install.sh MESON BUILD_DIR SOURCE_ROOT - `meson install` into a scratch DESTDIR, then
# the installed program run from unrelated folders: it finds its cards, experiments and
# traces in the install (docs/install.md), not in the source tree, and $CZ_CARDS_DIR still
# overrides the cards. Prints "N passed, N failed".
set -u
meson=$1
build=$2
root=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
unset CZ_CARDS_DIR CZ_SOURCE_ROOT

dest="$tmp/dest"
if ! "$meson" install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$tmp/install.log" 2>&1; then
    echo "FAIL: meson install --destdir"
    sed 's/^/  /' "$tmp/install.log" | tail -20
    echo "0 passed, 1 failed"
    exit 1
fi
cz=$(find "$dest" -path '*/bin/cadenza' -type f)
data=$(find "$dest" -path '*/share/cadenza' -type d)
check "one program and one data folder installed" \
    test -x "$cz" -a -d "$data" -a "$(echo "$cz" | wc -l)" -eq 1 -a "$(echo "$data" | wc -l)" -eq 1
check "the data keeps the source layout, without build files" bash -c \
    "[ -f '$data/models/cards/llama-3-8b.json' ] && [ -f '$data/models/hw/h100-sxm.json' ] &&
     [ -f '$data/experiments/default.json' ] && [ -f '$data/traces/data/sharegpt/README.md' ] &&
     [ -z \"\$(find '$dest' -name meson.build -o -name '*.c' -o -name '*.h' -o -name 'test_*')\" ] &&
     [ \$(find '$dest' -type f -perm -u+x | wc -l) -eq 1 ]"

mkdir "$tmp/elsewhere"
in_dir() { # folder, command...: runs the command there
    local d=$1
    shift
    (cd "$d" && "$@")
}
check "--version" bash -c "cd / && '$cz' --version | grep -q '^cadenza '"
check "the default experiment runs from /" bash -c \
    "cd / && '$cz' sim --quiet --summary '$tmp/default.json' && grep -q '\"completed\"' '$tmp/default.json'"
check "... on the installed trace: a missing one is named under the install" bash -c \
    "cd / && '$cz' sim --quiet --set workload.trace.path=../traces/data/none.csv 2>'$tmp/e';
     [ \$? -eq 2 ] && grep -qF \"workload.trace.path: cannot open '$data/experiments/../traces/data/none.csv'\" '$tmp/e'"
check "... and gives the build tree's result" bash -c \
    "cd '$tmp/elsewhere' && '$build/cli/cadenza' sim --quiet --summary '$tmp/default_build.json' &&
     cmp '$tmp/default.json' '$tmp/default_build.json'"
check "a shipped experiment by its installed path" in_dir "$tmp/elsewhere" \
    "$cz" sim "$data/experiments/liveserve/sharegpt_audio.json" --quiet
check "a card by name comes from the install" bash -c \
    "sed 's/\"name\": \"tiny-llama\"/\"name\": \"only-installed\"/' '$data/models/cards/tiny-llama.json' \
        >'$data/models/cards/only-installed.json' && [ ! -e '$root/models/cards/only-installed.json' ] &&
     cd '$tmp/elsewhere' && '$cz' generate --model only-installed --tokens 1,2 --max-tokens 2 >/dev/null"
check "an unknown card names the installed card folder" bash -c \
    "cd '$tmp/elsewhere' && '$cz' sim --set model=nope 2>'$tmp/e'; [ \$? -eq 2 ] &&
     grep -qF \"model: model card 'nope': cannot open '$data/models/cards/nope.json'\" '$tmp/e'"
mkdir -p "$tmp/cards/cards" "$tmp/cards/hw"
sed 's/"name": "tiny-llama"/"name": "only-env"/' "$data/models/cards/tiny-llama.json" \
    >"$tmp/cards/cards/only-env.json"
cp "$data/models/hw/cpu-host.json" "$tmp/cards/hw/"
check "CZ_CARDS_DIR overrides the installed cards" bash -c \
    "cd '$tmp/elsewhere' && CZ_CARDS_DIR='$tmp/cards' '$cz' generate --model only-env --tokens 1 --max-tokens 1 >/dev/null &&
     { CZ_CARDS_DIR='$tmp/cards' '$cz' generate --model only-installed --tokens 1 --max-tokens 1 2>'$tmp/e'; [ \$? -eq 2 ]; } &&
     grep -qF \"cannot open '$tmp/cards/cards/only-installed.json'\" '$tmp/e' && grep -qF 'CZ_CARDS_DIR' '$tmp/e'"
# relocatable: the data are found beside the program wherever the tree is moved
prefix=$(dirname "$(dirname "$(dirname "$data")")") # <prefix>/share/cadenza
mv "$prefix" "$tmp/moved"
mcz=$tmp/moved/${cz#"$prefix"/}
mdata=$tmp/moved/${data#"$prefix"/}
check "a moved install still finds its data" bash -c \
    "cd / && '$mcz' sim '$mdata/experiments/liveserve/sharegpt_audio.json' --quiet &&
     '$mcz' generate --model only-installed --tokens 1 --max-tokens 1 >/dev/null &&
     '$mcz' sim --quiet --set workload.max_requests=50"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
