#!/usr/bin/env bash
# tests/golden.sh CADENZA SOURCE_ROOT [--update] - every shipped experiment gives the same
# bytes: each config under experiments/ runs through `cadenza sim` (its JSON summary) or,
# for a sweep, `cadenza sweep` (every point's summary, as JSON lines), and the SHA-256 of
# the output must match tests/data/golden.sha256. A change that moves a result on purpose
# records the new digests with --update (and says why in its commit); any other change to
# a digest is a regression. Prints "N passed, N failed".
set -u
cz=$(realpath "$1")
root=$(realpath "$2")
update=${3:-}
list=$root/tests/data/golden.sha256
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
. "$root/tests/check.sh"

run_one() { # config path relative to the root; writes its digest to stdout
    local f=$1 out=$tmp/out.json
    rm -f "$out"
    if grep -q '"grid"' "$f"; then
        "$cz" sweep "$f" --quiet -o "$out" || return 1
    else
        "$cz" sim "$f" --quiet --no-progress --summary "$out" || return 1
    fi
    sha256sum "$out" | cut -d' ' -f1
}

# experiments/figures.json lists figures (cadenza figures), not an experiment
configs=$(find experiments -name '*.json' ! -path experiments/figures.json | LC_ALL=C sort)
if [ "$update" = "--update" ]; then
    : >"$tmp/new"
    for f in $configs; do
        d=$(run_one "$f") || { echo "FAIL: $f does not run"; exit 1; }
        echo "$d  $f" >>"$tmp/new"
    done
    cp "$tmp/new" "$list"
    echo "recorded $(wc -l <"$list") digests in $list"
    exit 0
fi

same_digest() { # config
    local want got
    want=$(awk -v f="$1" '$2 == f {print $1}' "$list")
    if [ -z "$want" ]; then
        echo "$1 has no recorded digest: run tests/golden.sh build/cli/cadenza . --update"
        return 1
    fi
    got=$(run_one "$1") || { echo "$1 failed to run"; return 1; }
    if [ "$got" != "$want" ]; then
        echo "$1: output changed (digest $got, recorded $want); if the change is meant," \
             "record it with tests/golden.sh build/cli/cadenza . --update"
        return 1
    fi
}

for f in $configs; do
    check "$f gives its recorded output" same_digest "$f"
done
# a digest recorded for a config that no longer exists is stale
while read -r _ f; do
    check "$f (recorded) exists" test -f "$f"
done <"$list"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
