# tests/check.sh - sourced by the shell suites: `check DESCRIPTION COMMAND...` runs a command
# that must succeed, counting passes and failures ($pass, $fail) and printing the output of
# a failure; `expect_exit CODE COMMAND...` succeeds when the command exits with CODE (its
# output kept in $tmp/cmd.out and $tmp/cmd.err). Scratch files go to $tmp, which the suite
# sets.
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
