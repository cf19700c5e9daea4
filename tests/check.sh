# tests/check.sh - sourced by the shell suites: `check DESCRIPTION COMMAND...` runs a command
# that must succeed, counting passes and failures ($pass, $fail) and printing the output of
# a failure; `expect_exit CODE COMMAND...` succeeds when the command exits with CODE (its
# output kept in $tmp/cmd.out and $tmp/cmd.err); `serve_start CONFIG [options...]` starts
# `$cz serve` on loopback for the server and client suites. Scratch files go to $tmp, which
# the suite sets.
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
serve_start() { # CONFIG [options...]: `$cz serve` on a free loopback port, its pid added to
    # $pids; waits until it answers; sets $port and $server (1 when it did not start)
    local cfg=$1
    shift
    rm -f "$tmp/port"
    "$cz" serve "$cfg" --port 0 --port-file "$tmp/port" --quiet "$@" \
        >"$tmp/server.out" 2>"$tmp/server.err" &
    server=$!
    pids+=("$server")
    for _ in $(seq 1 600); do
        if [ -s "$tmp/port" ]; then
            port=$(cat "$tmp/port")
            curl -s -o /dev/null "http://127.0.0.1:$port/health" && return 0
        fi
        kill -0 "$server" 2>/dev/null || break
        sleep 0.05
    done
    echo "the server did not start:"
    cat "$tmp/server.err"
    return 1
}
expect_exit() { # code, command...
    local want=$1
    shift
    "$@" >"$tmp/cmd.out" 2>"$tmp/cmd.err"
    [ $? -eq "$want" ]
}
