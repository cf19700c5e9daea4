#!/usr/bin/env bash
# tests/install.sh MESON BUILD_DIR SOURCE_ROOT - `meson install` into a scratch DESTDIR, then
# the installed program run from unrelated folders: it finds its cards, experiments and
# traces in the install (docs/install.md), not in the source tree, and $CZ_CARDS_DIR still
# overrides the cards; every docs/X.md its --help texts name is installed; a CUDA build
# installs its module and the installed program loads that one, not the build tree's.
# Prints "N passed, N failed".
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
     [ \$(find '$dest' -type f -perm -u+x ! -name libcz_cuda.so | wc -l) -eq 1 ]"

# the docs the --help texts name: `cadenza --help` and each command's
"$cz" --help >"$tmp/help" 2>&1
for c in $(sed -n '/^commands:/,/^$/s/^  \([a-z]\+\) .*/\1/p' "$tmp/help" | sort -u); do
    "$cz" "$c" --help >>"$tmp/help" 2>&1
done
grep -o 'docs/[A-Za-z0-9_-]*\.md' "$tmp/help" | sort -u >"$tmp/help_docs"
check "the --help texts of the program and its commands name docs" bash -c \
    "[ \$(grep -c '^  generate ' '$tmp/help') -ge 1 ] && [ \$(wc -l <'$tmp/help_docs') -ge 5 ] &&
     grep -qx docs/install.md '$tmp/help_docs'"
check "every doc the --help texts name is installed, as in the source tree" bash -c \
    "while read -r d; do cmp '$root/'\$d '$data/'\$d || exit 1; done <'$tmp/help_docs'"
check "... with the other docs but not their figures" bash -c \
    "[ \$(ls '$data/docs' | grep -c '\\.md\$') -eq \$(ls '$root/docs' | grep -c '\\.md\$') ] &&
     [ ! -e '$data/docs/figures' ]"

# the CUDA module: `generate --backend cuda --device 1023` fails on every machine (no device,
# or no device 1023), and a loaded module names itself in the failure
mkdir "$tmp/elsewhere"
cuda_err() { # program, then VAR=value settings: the stderr of a CUDA run, in $tmp/e
    local prog=$1
    shift
    (cd "$tmp/elsewhere" && env "$@" "$prog" generate --model tiny-llama --tokens 1 \
        --max-tokens 1 --backend cuda --device 1023 >/dev/null 2>"$tmp/e")
    [ $? -ne 0 ] && [ -s "$tmp/e" ]
}
names_module() { # program, module path, then VAR=value settings
    local prog=$1 path=$2
    shift 2
    cuda_err "$prog" "$@" && grep -qF "; CUDA module $path" "$tmp/e"
}
cuda_err "$build/cli/cadenza"
if grep -q 'built without CUDA' "$tmp/e"; then
    check "a build without CUDA installs no CUDA module" \
        test -z "$(find "$dest" -name 'libcz_cuda*')"
else
    mod=$(find "$dest" -name libcz_cuda.so)
    check "the CUDA module is installed, once, in <libdir>/cadenza" bash -c \
        "[ -f '$mod' ] && [ \$(echo '$mod' | wc -l) -eq 1 ] &&
         case '$mod' in '$dest'/*/lib*/cadenza/libcz_cuda.so) ;; *) exit 1 ;; esac"
    check "the build tree's program loads the build tree's module" \
        names_module "$build/cli/cadenza" "$build/kernels/libcz_cuda.so"
    check "the installed program loads the installed module, not the build tree's" \
        names_module "$cz" "$mod"
    overridden() {
        cuda_err "$cz" CZ_CUDA_MODULE="$tmp/none.so" &&
            grep -qF "backend 'cuda': cannot load the CUDA module $tmp/none.so: " "$tmp/e"
    }
    check "\$CZ_CUDA_MODULE overrides it" overridden
fi
in_dir() { # folder, command...: runs the command there
    local d=$1
    shift
    (cd "$d" && "$@")
}
check "--version" bash -c "cd / && '$cz' --version | grep -q '^cadenza '"
check "the default experiment runs from /" bash -c \
    "cd / && '$cz' sim --quiet --summary '$tmp/default.json' && grep -q '\"completed\"' '$tmp/default.json'"
check "... a --set trace path is the working directory's, not the install's" bash -c \
    "cd '$tmp/elsewhere' && '$cz' sim --quiet --set workload.trace.path=none.csv 2>'$tmp/e';
     [ \$? -eq 2 ] && grep -qF \"workload.trace.path: cannot open '$tmp/elsewhere/none.csv'\" '$tmp/e'"
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
if [ -n "${mod:-}" ]; then
    mmod=$tmp/moved/${mod#"$prefix"/}
    check "... and its CUDA module" names_module "$mcz" "$mmod"
    rm -f "$mmod"
    check "an install without its module falls back to the build tree's" \
        names_module "$mcz" "$build/kernels/libcz_cuda.so"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
