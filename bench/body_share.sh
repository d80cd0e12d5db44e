#!/usr/bin/env bash
# One key's slow large bodies against another key's small writes, on a
# real "tether serve" (SQLite, keys, loopback) of each build in turn
# (docs/benchmarks.md, "Large bodies at once", "One key's slow bodies"):
# key A opens SLOW connections that each announce a body of 4 MiB (the
# default --max-body) and send a byte every half second, then key B
# creates WRITES threads one after the other (a body of a few bytes each);
# prints each of B's answers (status, seconds) and, per build, how many
# got 201 and the median and slowest time.
#
# Usage: bash bench/body_share.sh OLD_BINARY NEW_BINARY
# Environment: SLOW [4], WRITES [5], PORT [28497]. Needs: curl, python3.
set -euo pipefail
OLD=$1 NEW=$2
SLOW=${SLOW:-4}
WRITES=${WRITES:-5}
PORT=${PORT:-28497}
url=http://127.0.0.1:$PORT
tmp=$(mktemp -d)
pid= slow=
trap 'kill "$pid" "$slow" 2>/dev/null || true; rm -rf "$tmp"' EXIT
printf 'admin admin-token-0123456789 admin\nclient key-a-token-0123456789 a\nclient key-b-token-0123456789 b\n' >"$tmp/keys"
for build in old new; do
	bin=$OLD
	[[ $build == new ]] && bin=$NEW
	rm -rf "$tmp/data"
	"$bin" serve --addr "127.0.0.1:$PORT" --data "$tmp/data" --keys "$tmp/keys" --log-level error 2>"$tmp/$build.log" &
	pid=$!
	until curl -sf "$url/readyz" >/dev/null; do sleep 0.1; done
	python3 - "$PORT" "$SLOW" <<'PY' &
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
conns = []
for _ in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"POST /v1/threads HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer key-a-token-0123456789\r\n"
              b"Content-Type: application/json\r\nContent-Length: 4194304\r\n\r\n{\"id\":\"")
    conns.append(c)
    time.sleep(0.2)
while True:
    time.sleep(0.5)
    for c in conns:
        try:
            c.sendall(b"a")
        except OSError:
            pass
PY
	slow=$!
	sleep 2
	times=()
	ok=0
	for i in $(seq "$WRITES"); do
		read -r code secs < <(curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -X POST "$url/v1/threads" \
			-H 'Authorization: Bearer key-b-token-0123456789' -d "{\"id\":\"b$i\"}")
		echo "$build: key B write $i: $code in ${secs}s"
		[[ $code == 201 ]] && ok=$((ok + 1))
		times+=("$secs")
	done
	kill "$slow" "$pid"
	wait "$slow" "$pid" 2>/dev/null || true
	printf '%s\n' "${times[@]}" | sort -n | awk -v b="$build" -v ok="$ok" -v n="$WRITES" \
		'{ t[NR] = $1 } END { printf "%s: %d of %d writes 201; median %.3fs, slowest %.3fs\n", b, ok, n, t[int((NR + 1) / 2)], t[NR] }'
done
