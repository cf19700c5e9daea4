#!/usr/bin/env bash
# The tokenizer cross-check (docs/tokenizer.md): runs tests/tokenizer_check.mjs, which
# compares tok_tool's encodings, decodings and chat renderings with those of the npm
# packages @huggingface/tokenizers and @huggingface/jinja installed in tests/node
# (`npm ci --prefix tests/node`). Exits 77 (meson's "skipped") when node or the packages
# are missing.
#
# usage: tests/tokenizer_check.sh TOK_TOOL SOURCE_ROOT
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 TOK_TOOL SOURCE_ROOT" >&2
    exit 2
fi
tool=$1
root=$2
if ! command -v node >/dev/null 2>&1; then
    echo "SKIP: node not found (Debian: apt-get install nodejs npm)"
    exit 77
fi
modules=$root/tests/node/node_modules/@huggingface
if [ ! -f "$modules/tokenizers/package.json" ] || [ ! -f "$modules/jinja/package.json" ]; then
    echo "SKIP: the reference packages are not installed: npm ci --prefix $root/tests/node"
    exit 77
fi
exec node "$root/tests/tokenizer_check.mjs" "$tool"
