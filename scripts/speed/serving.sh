# Sourced by the speed scripts that measure servers one after the other.
#   start_server LOG COMMAND...  runs COMMAND in the background, its output
#                                in LOG (SERVER_PID; killed if the script
#                                exits before stop_server)
#   wait_up URL [PATH]           waits until URL answers PATH (/health) with
#                                a success, or fails when the server exited
#                                or three minutes passed
#   stop_server                  stops it and waits for it to end

start_server() {
    local log="$1"
    shift
    "$@" >"$log" 2>&1 &
    SERVER_PID=$!
    trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
}

wait_up() {
    local url="$1" path="${2:-/health}"
    for _ in $(seq 1 180); do
        curl -sf "$url$path" >/dev/null && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited before $url was up" >&2; return 1; }
        sleep 1
    done
    echo "no server at $url" >&2
    return 1
}

stop_server() {
    kill "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
    trap - EXIT
}
