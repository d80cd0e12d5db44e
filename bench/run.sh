#!/usr/bin/env bash
# Runs the whole measurement of docs/benchmarks.md: for each configuration,
# RUNS times, a fresh "tether serve" (new data directory) and one
# "tether bench" scenario against it; then prints a table of the median
# and the range of each figure. JSON results, server logs and (with
# PROFILE=1) CPU profiles of the server stay in $OUT.
#
# Usage: bash bench/run.sh [name-filter]     e.g. bash bench/run.sh fanout
#
# Environment (defaults in brackets):
#   RUNS [3]          runs of each configuration
#   DURATION [10s]    how long each run appends (idle: holds its connections)
#   OUT [a new dir]   where results go
#   PORT [28473], DEBUG_PORT [26473]
#   PROFILE [0]       1: take a CPU profile of the server during the first run
#                     of each configuration ($OUT/<name>.prof)
#   QUIET [70]        before each run, wait until the machine's CPU is at least
#                     this % idle (others' work skews results), at most
#   QUIET_WAIT [120]  seconds; the idle % seen is recorded with each result
#   MAX_OTHERS [0.3]  a run during which other processes used more than this
#   RETRIES [4]       many cores (the bench measures it) is done again, up to
#                     RETRIES times; the last try is kept either way
#   GOBENCH [1]       also run the Go benchmarks (engine BenchmarkAppend, api
#                     BenchmarkFanout) RUNS times, with CPU profiles in $OUT
#   REPORT [0]        1: run nothing, print the table of the results in $OUT
# Needs: go, curl, jq.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/tether-bench.XXXXXX")}
PORT=${PORT:-28473}
DEBUG_PORT=${DEBUG_PORT:-26473}
PROFILE=${PROFILE:-0}
QUIET=${QUIET:-70}
QUIET_WAIT=${QUIET_WAIT:-120}
MAX_OTHERS=${MAX_OTHERS:-0.3}
RETRIES=${RETRIES:-4}
GOBENCH=${GOBENCH:-1}
REPORT=${REPORT:-0}
FILTER=${1:-}

for tool in go curl jq; do
	command -v "$tool" >/dev/null || { echo "bench/run.sh needs $tool" >&2; exit 1; }
done
mkdir -p "$OUT"
BIN="$OUT/tether"
[[ $REPORT == 1 ]] || go build -o "$BIN" ./cmd/tether
URL="http://127.0.0.1:$PORT"

# Each configuration: name | serve flags | bench flags | figures to report,
# as label=jq-expression;... over the scenario's JSON result.
CONFIGS=(
	"append-1t-b1|                |--scenario append --threads 1 --batch 1   |events/s=.events_per_sec;p99 ms=.request_latency.p99_ms"
	"append-1t-b1-fsync|--fsync   |--scenario append --threads 1 --batch 1   |events/s=.events_per_sec;p99 ms=.request_latency.p99_ms"
	"append-1t-b10|               |--scenario append --threads 1 --batch 10  |events/s=.events_per_sec;p99 ms=.request_latency.p99_ms"
	"append-1t-b10-fsync|--fsync  |--scenario append --threads 1 --batch 10  |events/s=.events_per_sec;p99 ms=.request_latency.p99_ms"
	"append-100t-b1|              |--scenario append --threads 100 --batch 1 |events/s=.events_per_sec;p99 ms=.request_latency.p99_ms"
	"append-100t-b1-fsync|--fsync |--scenario append --threads 100 --batch 1 |events/s=.events_per_sec;p99 ms=.request_latency.p99_ms"
	"append-100t-b10|             |--scenario append --threads 100 --batch 10|events/s=.events_per_sec;p99 ms=.request_latency.p99_ms"
	"append-100t-b10-fsync|--fsync|--scenario append --threads 100 --batch 10|events/s=.events_per_sec;p99 ms=.request_latency.p99_ms"
	"fanout-1s|                   |--scenario fanout --subscribers 1 --batch 10|delivered/s=.delivered_per_sec;complete=.complete"
	"fanout-100s|                 |--scenario fanout --subscribers 100 --batch 10|delivered/s=.delivered_per_sec;complete=.complete"
	"fanout-1000s|                |--scenario fanout --subscribers 1000 --batch 10|delivered/s=.delivered_per_sec;complete=.complete"
	"fanout-1000s-b100|           |--scenario fanout --subscribers 1000 --batch 100 --window 4000|delivered/s=.delivered_per_sec;complete=.complete"
	"fanout-1000s-b100-c4|        |--scenario fanout --subscribers 1000 --batch 100 --window 4000 --concurrency 4|delivered/s=.delivered_per_sec;complete=.complete"
	"latency-10k|                 |--scenario latency --rate 10000|p50 ms=.delivery_latency.p50_ms;p99 ms=.delivery_latency.p99_ms;max ms=.delivery_latency.max_ms"
	"latency-10k-fsync|--fsync    |--scenario latency --rate 10000|p50 ms=.delivery_latency.p50_ms;p99 ms=.delivery_latency.p99_ms;max ms=.delivery_latency.max_ms"
	"idle-1000|                   |--scenario idle --connections 1000|bytes/conn=.rss_bytes_per_connection;heap+stack/conn=(.heap_inuse_bytes_per_connection+.stack_inuse_bytes_per_connection)"
	"idle-ws-1000|                |--scenario idle --transport ws --connections 1000|bytes/conn=.rss_bytes_per_connection;heap+stack/conn=(.heap_inuse_bytes_per_connection+.stack_inuse_bytes_per_connection)"
)

SERVER_PID=
DATA=
stop_server() {
	if [[ -n $SERVER_PID ]]; then
		kill -TERM "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=
	fi
	if [[ -n $DATA ]]; then
		rm -rf "$DATA" # a run leaves up to a few hundred MB
		DATA=
	fi
}
trap stop_server EXIT

start_server() { # name run flags...
	local name=$1 run=$2
	shift 2
	local data="$OUT/data-$name-$run"
	rm -rf "$data"
	DATA=$data
	if curl -fsS "$URL/healthz" >/dev/null 2>&1; then
		echo "something already answers on $URL: stop it or set PORT" >&2
		exit 1
	fi
	"$BIN" serve --addr "127.0.0.1:$PORT" --debug-addr "127.0.0.1:$DEBUG_PORT" --data "$data" --log-level warn "$@" \
		>"$OUT/$name-$run.serve.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		curl -fsS "$URL/healthz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "the server did not start; see $OUT/$name-$run.serve.log" >&2
	exit 1
}

# idle_pct prints the % of CPU time the machine was idle over a second.
idle_pct() {
	local a b
	read -r -a a < <(head -1 /proc/stat)
	sleep 1
	read -r -a b < <(head -1 /proc/stat)
	local total=0 i
	for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
	echo $((100 * (b[4] - a[4] + b[5] - a[5]) / (total > 0 ? total : 1)))
}

wait_quiet() {
	[[ -r /proc/stat ]] || { echo "?"; return; }
	local deadline=$((SECONDS + QUIET_WAIT)) idle
	while :; do
		idle=$(idle_pct)
		if ((idle >= QUIET || SECONDS >= deadline)); then
			echo "$idle"
			return
		fi
	done
}

secs() { # 10s → 10
	local d=$1
	d=${d%s}
	echo "${d%.*}"
}

if [[ $REPORT == 1 ]]; then
	echo "results in $OUT"
else
	COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo ?)}
	echo "results in $OUT ($(nproc) CPUs, $(go version | cut -d" " -f3), commit $COMMIT)" | tee "$OUT/README"
fi
for cfg in "${CONFIGS[@]}"; do
	[[ $REPORT == 1 ]] && break
	IFS='|' read -r name serve_flags bench_flags figures <<<"$cfg"
	name=$(echo $name)
	[[ -n $FILTER && $name != *$FILTER* ]] && continue
	for run in $(seq "$RUNS"); do
		for try in $(seq 0 "$RETRIES"); do
			idle=$(wait_quiet)
			# shellcheck disable=SC2086 # the flags are words
			start_server "$name" "$run" $serve_flags
			prof_pid=
			if [[ $PROFILE == 1 && $run == 1 && $name != idle* ]]; then
				(sleep 3 && curl -fsS -o "$OUT/$name.prof" \
					"http://127.0.0.1:$DEBUG_PORT/debug/pprof/profile?seconds=$(($(secs "$DURATION") - 4))" 2>/dev/null) &
				prof_pid=$!
			fi
			# shellcheck disable=SC2086
			if ! "$BIN" bench --server "$URL" --duration "$DURATION" --json $bench_flags \
				>"$OUT/$name-$run.json" 2>"$OUT/$name-$run.bench.log"; then
				echo "$name run $run failed: $(tail -1 "$OUT/$name-$run.bench.log")" >&2
			fi
			[[ -n $prof_pid ]] && wait "$prof_pid"
			stop_server
			jq -c --arg idle "$idle" --argjson attempt "$try" \
				'.results[0] + {machine_idle_pct: ($idle|tonumber? // null), attempt: $attempt}' \
				"$OUT/$name-$run.json" >"$OUT/$name-$run.result.json" 2>/dev/null || true
			others=$(jq -r '.cpu.others_cores // -1' "$OUT/$name-$run.result.json" 2>/dev/null || echo -1)
			printf '%-24s run %s try %s  idle before %3s%%  %s\n' "$name" "$run" "$try" "$idle" \
				"$(jq -r '[.cpu // empty | "server \(.server_cores) cores, bench \(.bench_cores), others \(.others_cores)"] | join("")' \
					"$OUT/$name-$run.result.json" 2>/dev/null)" >&2
			# Others' load is only known where the bench measures CPU.
			if [[ $others == -1 ]] || awk -v o="$others" -v m="$MAX_OTHERS" 'BEGIN{exit !(o <= m)}'; then
				break
			fi
			cp "$OUT/$name-$run.result.json" "$OUT/$name-$run.noisy$try.json"
		done
	done
done

# The table: median and range over the runs of each figure.
echo
printf '%-24s %-16s %14s %26s %12s %12s\n' configuration figure median "range (min – max)" "server cores" "others"
for cfg in "${CONFIGS[@]}"; do
	IFS='|' read -r name serve_flags bench_flags figures <<<"$cfg"
	name=$(echo $name)
	[[ -n $FILTER && $name != *$FILTER* ]] && continue
	files=("$OUT/$name"-[0-9]*.result.json)
	[[ -e ${files[0]} ]] || continue
	IFS=';' read -r -a figs <<<"$figures"
	for fig in "${figs[@]}"; do
		label=${fig%%=*}
		expr=${fig#*=}
		jq -rs --arg name "$name" --arg fig "$label" "
			def med: sort | .[length/2|floor];
			def fmt: if type == \"number\" then (if . >= 100 then (.|round|tostring) else (.*100|round/100|tostring) end) else tostring end;
			[.[] | $expr] as \$v | [.[] | .cpu.server_cores // empty] as \$c | [.[] | .cpu.others_cores // empty] as \$o |
			\"\(\$name)\t\(\$fig)\t\(\$v|med|fmt)\t\(\$v|min|fmt) – \(\$v|max|fmt)\t\(if (\$c|length) > 0 then (\$c|med|fmt) else \"-\" end)\t\(if (\$o|length) > 0 then (\$o|max|fmt) else \"-\" end)\"
		" "${files[@]}" | awk -F'\t' '{printf "%-24s %-16s %14s %26s %12s %12s\n", $1, $2, $3, $4, $5, $6}'
	done
done

# The Go benchmarks: the same paths without HTTP on the append side
# (engine) and with a real HTTP server on the fan-out side (api).
gobench() { # package benchmark metric
	local pkg=$1 bench=$2 metric=$3 out="$OUT/go-$2"
	if [[ $REPORT != 1 ]]; then
		wait_quiet >/dev/null
		go test -run '^$' -bench "^$bench\$" -count "$RUNS" -cpuprofile "$out.prof" -o "$out.test" "./$pkg" >"$out.txt" 2>&1 ||
			{ echo "go test $pkg failed; see $out.txt" >&2; return; }
	fi
	[[ -e $out.txt ]] || return
	# Median and range of the metric over the runs of each sub-benchmark.
	awk -v m="$metric" '$1 ~ /^Benchmark/ { for (i = 3; i < NF; i++) if ($(i+1) == m) v[$1] = v[$1] " " $i }
		END { for (b in v) { n = split(v[b], a, " ")
			for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
			printf "%-58s %-18s %12.0f %12.0f – %.0f\n", b, m, a[int((n+1)/2)], a[1], a[n] } }' "$out.txt" | sort
}
if [[ $GOBENCH == 1 && ( -z $FILTER || go == *$FILTER* ) ]]; then
	echo
	printf '%-58s %-18s %12s %s\n' benchmark figure median "range (min – max)"
	gobench engine BenchmarkAppend events/s
	gobench api BenchmarkFanout delivered-events/s
fi
