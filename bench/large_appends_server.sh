#!/usr/bin/env bash
# The memory of a real "tether serve" (SQLite, no keys, on loopback) that
# takes N appends of a 4 MiB body at once, each to a run of its own: its
# RSS before, its peak RSS (VmHWM) and its RSS after, with the budget of
# bodies in flight off (--max-body-in-flight -1) and at its default.
# Figures in docs/benchmarks.md ("Large bodies at once").
#
# Usage: bash bench/large_appends_server.sh [N...]   (default: 6 24)
# Environment: RUNS [3], PORT [28479], BUDGETS ["-1 0"]: values of
# --max-body-in-flight (-1 off, 0 the default). Needs: go, curl, jq.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
PORT=${PORT:-28479}
ns=("$@")
[[ ${#ns[@]} -gt 0 ]] || ns=(6 24)
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
go build -o "$tmp/tether" ./cmd/tether
url=http://127.0.0.1:$PORT
# One body: 4 text.delta events of 1,000,000 bytes, just under 4 MiB.
python3 - "$tmp/body.json" <<'PY'
import json, sys
ev = {"type": "text.delta", "message_id": "m1", "delta": "x" * 999984}
open(sys.argv[1], "w").write(json.dumps([ev] * 4))
PY
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
status() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$pid/status"; }
for n in "${ns[@]}"; do
	for budget in ${BUDGETS:--1 0}; do
		for _ in $(seq "$RUNS"); do
			rm -rf "$tmp/data"
			"$tmp/tether" serve --addr "127.0.0.1:$PORT" --data "$tmp/data" --agents bench --max-body-in-flight "$budget" --log-level error &
			pid=$!
			until curl -sf "$url/readyz" >/dev/null; do sleep 0.1; done
			leases=()
			for i in $(seq "$n"); do
				curl -sf -X POST "$url/v1/threads" -d "{\"id\":\"t$i\"}" >/dev/null
				curl -sf -X POST "$url/v1/threads/t$i/runs" -d '{"agent":"bench","input":{"messages":[{"role":"user","content":"go"}]}}' >/dev/null
				claim=$(curl -sf -X POST "$url/v1/workers/claim" -d '{"worker_id":"w","agents":["bench"],"wait_ms":5000}')
				rid=$(jq -r .run.id <<<"$claim")
				lease=$(jq -r .lease.token <<<"$claim")
				curl -sf -X POST "$url/v1/runs/$rid/events" -H "Tether-Lease: $lease" -d '[{"type":"message.started","message_id":"m1","role":"assistant"}]' >/dev/null
				leases+=("$rid $lease")
			done
			before=$(status VmRSS)
			echo 5 >"/proc/$pid/clear_refs"
			start=$(date +%s.%N)
			for l in "${leases[@]}"; do
				read -r rid lease <<<"$l"
				curl -s -o /dev/null -w '%{http_code}\n' -X POST "$url/v1/runs/$rid/events" -H "Tether-Lease: $lease" -H 'Content-Type: application/json' --data-binary "@$tmp/body.json" >>"$tmp/codes" &
			done
			wait $(jobs -p | grep -v "^$pid\$") 2>/dev/null || true
			secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
			peak=$(status VmHWM)
			after=$(status VmRSS)
			codes=$(sort "$tmp/codes" | uniq -c | tr -s ' ' | tr '\n' ' ')
			rm -f "$tmp/codes"
			echo "appends=$n budget=$(case $budget in -1) echo off ;; 0) echo default ;; *) echo "$budget" ;; esac) rss_before=$(mib "$before")MiB peak_rss=$(mib "$peak")MiB rss_after=$(mib "$after")MiB wave=${secs}s codes:$codes"
			kill "$pid"
			wait "$pid" 2>/dev/null || true
			pid=
		done
	done
done
