#!/usr/bin/env bash
# Compares two builds of tether on one event per request (docs/benchmarks.md,
# section "One event per request"): `tether bench --scenario append` with
# 50 threads, one 200-byte text.delta per request, against a fresh server
# of each build in turn, RUNS times, so that the machine's noise falls on
# both alike. Prints each run and the medians: events/s, server CPU per
# event (server cores / events/s: the figure that depends least on what
# else runs on the machine), events/s per server core, request p50/p99.
# With PROFILE=1 it then takes a CPU profile of each build's server during
# one more run each and prints where each microsecond of server CPU per
# event went, step by step.
#
# Usage: bash bench/append_ab.sh OLD_BINARY NEW_BINARY
#   e.g. mkdir /tmp/old && git archive a11ae06 | tar -x -C /tmp/old &&
#        (cd /tmp/old && go build -o /tmp/tether-old ./cmd/tether) &&
#        go build -o /tmp/tether-new ./cmd/tether &&
#        bash bench/append_ab.sh /tmp/tether-old /tmp/tether-new
#
# Environment (defaults in brackets):
#   RUNS [3]          runs of each build
#   DURATION [8s]     how long each run appends
#   THREADS [50]      producers, one thread each
#   SERVE_FLAGS []    e.g. --fsync
#   PROFILE [0]       1: also profile each build (a 12 s run, 9 s profile)
#   OUT [a new dir]   where results go
#   PORT [28593], DEBUG_PORT [26593]
# Needs: go, curl, jq, python3.
set -euo pipefail
OLD=$1 NEW=$2
RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
THREADS=${THREADS:-50}
SERVE_FLAGS=${SERVE_FLAGS:-}
PROFILE=${PROFILE:-0}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/tether-append-ab.XXXXXX")}
PORT=${PORT:-28593}
DEBUG_PORT=${DEBUG_PORT:-26593}
mkdir -p "$OUT"
if curl -s -o /dev/null "http://127.0.0.1:$PORT/" || curl -s -o /dev/null "http://127.0.0.1:$DEBUG_PORT/"; then
	echo "append_ab.sh: something already listens on port $PORT or $DEBUG_PORT; set PORT and DEBUG_PORT" >&2
	exit 1
fi

# run BIN LABEL DURATION PROFILE_SECONDS: a fresh server and data directory,
# one bench run; its JSON result goes to $OUT/LABEL.json.
run() {
	local bin=$1 label=$2 dur=$3 prof=$4 data sp pp=
	data=$(mktemp -d "$OUT/data.XXXXXX")
	# shellcheck disable=SC2086
	"$bin" serve --addr "127.0.0.1:$PORT" --data "$data" --debug-addr "127.0.0.1:$DEBUG_PORT" --log-level warn $SERVE_FLAGS >"$OUT/$label.log" 2>&1 &
	sp=$!
	# Talk only to this server: if it could not listen (the port is
	# someone else's), stop rather than load theirs.
	for _ in $(seq 100); do
		kill -0 "$sp" 2>/dev/null || { cat "$OUT/$label.log" >&2; echo "append_ab.sh: the server did not start" >&2; exit 1; }
		curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
		sleep 0.1
	done
	if [[ $prof != 0 ]]; then
		(sleep 2; curl -s -o "$OUT/$label.prof" "http://127.0.0.1:$DEBUG_PORT/debug/pprof/profile?seconds=$prof") &
		pp=$!
	fi
	"$bin" bench --server "http://127.0.0.1:$PORT" --scenario append --threads "$THREADS" --batch 1 \
		--event-bytes 200 --duration "$dur" --json >"$OUT/$label.json" 2>"$OUT/$label.err"
	[[ -n $pp ]] && wait "$pp"
	kill -TERM "$sp"
	wait "$sp" 2>/dev/null || true
	rm -rf "$data"
	jq -c --arg l "$label" '.results[0] | {run: $l, events_per_sec: (.events_per_sec|floor),
		server_us_per_event: (.cpu.server_cores*1e6/.events_per_sec*10|floor/10), cpu: .cpu,
		p50_ms: .request_latency.p50_ms, p99_ms: .request_latency.p99_ms, errors: .errors}' "$OUT/$label.json"
}

for i in $(seq "$RUNS"); do
	run "$OLD" "old-$i" "$DURATION" 0
	run "$NEW" "new-$i" "$DURATION" 0
done

echo "medians of $RUNS runs (old → new):"
for v in old new; do
	jq -s -c --arg v "$v" 'def med: sort | .[length/2|floor];
		map(.results[0]) | {build: $v, events_per_sec: (map(.events_per_sec)|med|floor),
		server_us_per_event: (map(.cpu.server_cores*1e6/.events_per_sec)|med*10|floor/10),
		events_per_server_core: (map(.events_per_sec/.cpu.server_cores)|med|floor),
		p50_ms: (map(.request_latency.p50_ms)|med), p99_ms: (map(.request_latency.p99_ms)|med),
		others_cores: (map(.cpu.others_cores)|[min, max])}' "$OUT"/$v-[0-9]*.json
done

[[ $PROFILE == 1 ]] || exit 0
run "$OLD" old-prof 12s 9 >/dev/null
run "$NEW" new-prof 12s 9 >/dev/null

# Each step (NAME;FOCUS;IGNORE) is what pprof counts under the functions
# that match FOCUS but not IGNORE, in µs of server CPU per event appended.
STEPS=(
	'HTTP: read and parse the request;net/http.\(\*conn\).readRequest|bufio.\(\*Reader\).Peek|backgroundRead;serverHandler'
	'HTTP: write the answer;net/http.\(\*response\).finishRequest;'
	'HTTP: the rest of the connection loop;net/http.\(\*conn\).serve;serverHandler|finishRequest|readRequest|Reader\).Peek'
	'middleware (log, metrics, guard, routing);net/http.serverHandler.ServeHTTP;appendEvents'
	'handler: read the body;api.readBody;'
	'handler: decode the events;tether.DecodeEvents;'
	'handler: encode the answer;api.writeJSON|api.appendAnswer;'
	'engine: plan, validate, encode, queue;engine.\(\*Engine\).accept;'
	'engine: the rest of the append (find the thread, checks);engine.\(\*Engine\).ProducerAppend;engine.\(\*Engine\).accept'
	'engine: the flush goroutine of the thread (without the store);engine.\(\*Engine\).flush;writeLoop'
	'store writer: the statements of the batches (thread row, runs);sqlitestore.\(\*Store\).(writeCommit|checkCommit);'
	'store writer: the INSERT of the group events;sqlitestore.\(\*Store\).insertDeferred;'
	'store writer: BEGIN and COMMIT (WAL frames);sqlitestore.\(\*Store\).transact;writeCommit|checkCommit|insertDeferred'
	'store writer: notify (fold, hub publish);sqlitestore.\(\*Store\).committed;'
	'store writer: the rest;sqlitestore.\(\*Store\).writeLoop;transact|committed'
	'store: checkpointer;sqlitestore.\(\*Store\).(checkpointLoop|checkpoint);'
	'GC workers;runtime.gcBgMarkWorker;'
	'scheduler and the rest;.;net/http.\(\*conn\).serve|sqlitestore|engine.\(\*Engine\).flush|gcBgMarkWorker'
)
# seconds BIN PROF FOCUS IGNORE: CPU seconds pprof counts there.
seconds() {
	local args=(-top -nodecount=100000 -focus "$3")
	[[ -n $4 ]] && args+=(-ignore "$4")
	go tool pprof "${args[@]}" "$1" "$2" 2>/dev/null |
		sed -n 's/^Showing nodes accounting for \([0-9.]*\)\(m\?\)s,.*/\1 \2/p' |
		awk '{print ($2 == "m") ? $1/1000 : $1}' | head -1
}
echo
echo "| step | old µs/event | new µs/event |"
echo "|---|---|---|"
for step in "${STEPS[@]}"; do
	IFS=';' read -r name focus ignore <<<"$step"
	row="| $name"
	for v in old new; do
		bin=$OLD; [[ $v == new ]] && bin=$NEW
		evs=$(jq '.results[0].events_per_sec' "$OUT/$v-prof.json")
		s=$(seconds "$bin" "$OUT/$v-prof.prof" "$focus" "$ignore")
		row+=" | $(python3 -c "print('%.1f' % (${s:-0} / 9 * 1e6 / $evs))")"
	done
	echo "$row |"
done
