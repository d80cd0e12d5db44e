#!/usr/bin/env bash
# Measures the JetStream store next to SQLite (docs/benchmarks.md, section
# "JetStream store"): for each configuration, RUNS rounds; each round runs
# the same `tether bench` scenario against a fresh `tether serve` on each
# store in turn (SQLite; NATS JetStream on one embedded server, R1; on an
# embedded cluster of three servers in one process, R3), so that the
# machine's noise falls on all three alike and the ratios hold. JetStream
# runs on this machine too (internal/natsdev), sharing its cores. Then
# `go test -bench BenchmarkCommit` of both stores. Prints the tables.
#
# Usage: bash bench/jetstream.sh [name-filter]     (about 17 min with the defaults)
#
# Environment (defaults in brackets):
#   RUNS [3]           rounds of each configuration
#   DURATION [8s]      how long each run appends
#   STORES [sqlite nats-r1 nats-r3]
#   OUT [a new dir]    where results go
#   PORT [28473]
#   QUIET [60]         before each run, wait until the machine's CPU is at
#   QUIET_WAIT [60]    least this % idle, at most this many seconds
#   MAX_OTHERS [0.3]   a run during which other processes (JetStream's not
#   RETRIES [1]        counted) used more than this many cores is done
#                      again, up to RETRIES times; the last try is kept
#   GOBENCH [1]        also run BenchmarkCommit of natsstore and sqlitestore
#   REPORT [0]         1: run nothing, print the tables of the results in $OUT
# Needs: go, curl, jq.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
STORES=${STORES:-sqlite nats-r1 nats-r3}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/tether-bench-js.XXXXXX")}
PORT=${PORT:-28473}
QUIET=${QUIET:-60}
QUIET_WAIT=${QUIET_WAIT:-60}
MAX_OTHERS=${MAX_OTHERS:-0.3}
RETRIES=${RETRIES:-1}
GOBENCH=${GOBENCH:-1}
REPORT=${REPORT:-0}
FILTER=${1:-}

for tool in go curl jq; do
	command -v "$tool" >/dev/null || { echo "bench/jetstream.sh needs $tool" >&2; exit 1; }
done
mkdir -p "$OUT"
if [[ $REPORT != 1 ]]; then
	go build -o "$OUT/tether" ./cmd/tether
	go build -o "$OUT/natsdev" ./internal/natsdev
fi
URL="http://127.0.0.1:$PORT"
TCK=$(getconf CLK_TCK)

# name | bench flags | figure (jq over the scenario's result)
CONFIGS=(
	"append-1t-b1    |--scenario append --threads 1 --batch 1    |.events_per_sec"
	"append-1t-b10   |--scenario append --threads 1 --batch 10   |.events_per_sec"
	"append-100t-b1  |--scenario append --threads 100 --batch 1  |.events_per_sec"
	"append-100t-b10 |--scenario append --threads 100 --batch 10 |.events_per_sec"
	"fanout-1s       |--scenario fanout --subscribers 1 --batch 10   |.delivered_per_sec"
	"fanout-100s     |--scenario fanout --subscribers 100 --batch 10 |.delivered_per_sec"
	"fanout-100s-c4  |--scenario fanout --subscribers 100 --batch 10 --concurrency 4|.delivered_per_sec"
)

SERVER_PID= NATS_PID= DATA=
stop() {
	if [[ -n $SERVER_PID ]]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=; fi
	if [[ -n $NATS_PID ]]; then kill -TERM "$NATS_PID" 2>/dev/null || true; wait "$NATS_PID" 2>/dev/null || true; NATS_PID=; fi
	if [[ -n $DATA ]]; then rm -rf "$DATA"; DATA=; fi
}
trap stop EXIT

start() { # store log-prefix
	local store=$1 log=$2 flags=()
	DATA=$(mktemp -d "$OUT/data.XXXXXX")
	if curl -fsS "$URL/healthz" >/dev/null 2>&1; then
		echo "something already answers on $URL: stop it or set PORT" >&2
		exit 1
	fi
	case $store in
	nats-r1 | nats-r3)
		local n=${store#nats-r}
		"$OUT/natsdev" -port 0 -servers "$n" -dir "$DATA/nats" >"$DATA/nats.url" 2>"$log.nats.log" &
		NATS_PID=$!
		for _ in $(seq 300); do [[ -s $DATA/nats.url ]] && break; sleep 0.1; done
		[[ -s $DATA/nats.url ]] || { echo "natsdev did not start; see $log.nats.log" >&2; exit 1; }
		flags=(--store "$(head -1 "$DATA/nats.url")" --nats-replicas "$n" --node-id bench)
		;;
	esac
	"$OUT/tether" serve --addr "127.0.0.1:$PORT" --data "$DATA/tether" --log-level warn "${flags[@]}" >"$log.serve.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 300); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		curl -fsS "$URL/healthz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "the server did not start; see $log.serve.log" >&2
	exit 1
}

ticks() { # CPU ticks a process used so far (0 if none)
	[[ -n ${1:-} && -r /proc/$1/stat ]] || { echo 0; return; }
	awk '{print $14 + $15}' "/proc/$1/stat"
}

idle_pct() {
	local a b total=0 i
	read -r -a a < <(head -1 /proc/stat)
	sleep 1
	read -r -a b < <(head -1 /proc/stat)
	for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
	echo $((100 * (b[4] - a[4] + b[5] - a[5]) / (total > 0 ? total : 1)))
}
wait_quiet() {
	[[ -r /proc/stat ]] || return 0
	local deadline=$((SECONDS + QUIET_WAIT))
	while (($(idle_pct) < QUIET && SECONDS < deadline)); do :; done
}

if [[ $REPORT != 1 ]]; then
	echo "results in $OUT ($(nproc) CPUs, $(go version | cut -d' ' -f3), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?))" | tee "$OUT/README"
	for cfg in "${CONFIGS[@]}"; do
		IFS='|' read -r name flags _ <<<"$cfg"
		name=$(echo $name)
		[[ -n $FILTER && $name != *$FILTER* ]] && continue
		for run in $(seq "$RUNS"); do
			for store in $STORES; do
				base="$OUT/$name-$store-$run"
				for try in $(seq 0 "$RETRIES"); do
					wait_quiet
					start "$store" "$base"
					t0=$(ticks "$NATS_PID")
					# shellcheck disable=SC2086 # the flags are words
					"$OUT/tether" bench --server "$URL" --duration "$DURATION" --json $flags >"$base.json" 2>"$base.bench.log" ||
						echo "$name $store run $run failed: $(tail -1 "$base.bench.log")" >&2
					t1=$(ticks "$NATS_PID")
					secs=$(jq -r '.results[0].seconds // 1' "$base.json" 2>/dev/null || echo 1)
					nats=$(awk -v d=$((t1 - t0)) -v t="$TCK" -v s="$secs" 'BEGIN{printf "%.2f", d / t / s}')
					stop
					jq -c --argjson nats "$nats" '.results[0] + {nats_cores: $nats}' "$base.json" >"$base.result.json" 2>/dev/null || true
					others=$(jq -r '(.cpu.others_cores // -1) - .nats_cores' "$base.result.json" 2>/dev/null || echo -1)
					printf '%-16s %-8s run %s  %s\n' "$name" "$store" "$run" \
						"$(jq -r '"\(.events_per_sec // .delivered_per_sec)/s, tether \(.cpu.server_cores) cores, nats \(.nats_cores), bench \(.cpu.bench_cores), others \((.cpu.others_cores - .nats_cores) * 100 | round / 100)"' "$base.result.json" 2>/dev/null)" >&2
					if awk -v o="$others" -v m="$MAX_OTHERS" 'BEGIN{exit !(o > -0.5 && o <= m)}'; then # -1 - nats: not measured
						break
					elif ((try < RETRIES)); then
						echo "  others used $others cores: again" >&2
					fi
				done
			done
		done
	done
fi

# The table: median and range of each figure, the ratio of medians to
# SQLite's, the cores tether and the JetStream servers used (medians), and
# the most that other processes used in a run (JetStream's not counted).
echo
printf '%-16s %-8s %12s %24s %8s %12s %10s %10s\n' configuration store median "range (min – max)" "÷ sqlite" "tether cores" "nats cores" "others max"
for cfg in "${CONFIGS[@]}"; do
	IFS='|' read -r name _ figure <<<"$cfg"
	name=$(echo $name)
	figure=$(echo $figure)
	[[ -n $FILTER && $name != *$FILTER* ]] && continue
	base=
	for store in $STORES; do
		files=("$OUT/$name-$store"-[0-9]*.result.json)
		[[ -e ${files[0]} ]] || continue
		line=$(jq -rs "
			def med: sort | if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
			[.[] | $figure] as \$v | [.[] | .cpu.server_cores] as \$c | [.[] | .nats_cores] as \$n |
			[.[] | ((.cpu.others_cores - .nats_cores) * 100 | round / 100)] as \$o |
			\"\(\$v|med|round)\t\(\$v|min|round) – \(\$v|max|round)\t\(\$c|med)\t\(\$n|med)\t\(\$o|max)\"
		" "${files[@]}")
		IFS=$'\t' read -r med range cores nats others <<<"$line"
		[[ -z $base ]] && base=$med
		ratio=$(awk -v a="$med" -v b="$base" 'BEGIN{printf "%.2f", (b > 0 ? a / b : 0)}')
		printf '%-16s %-8s %12s %24s %8s %12s %10s %10s\n' "$name" "$store" "$med" "$range" "$ratio" "$cores" "$nats" "$others"
	done
done

# The stores alone: BenchmarkCommit of each (one goroutine per thread
# committing batches back to back; events/s).
if [[ $GOBENCH == 1 && ( -z $FILTER || go == *$FILTER* ) ]]; then
	if [[ $REPORT != 1 ]]; then
		wait_quiet
		go test -run '^$' -bench '^BenchmarkCommit$' -count "$RUNS" ./store/natsstore >"$OUT/go-natsstore.txt" 2>&1 || echo "natsstore benchmark failed; see $OUT/go-natsstore.txt" >&2
		wait_quiet
		go test -run '^$' -bench '^BenchmarkCommit$' -count "$RUNS" ./store/sqlitestore >"$OUT/go-sqlitestore.txt" 2>&1 || echo "sqlitestore benchmark failed; see $OUT/go-sqlitestore.txt" >&2
	fi
	echo
	printf '%-72s %12s %s\n' benchmark "events/s" "range (min – max)"
	for f in "$OUT/go-sqlitestore.txt" "$OUT/go-natsstore.txt"; do
		[[ -e $f ]] || continue
		pkg=$(basename "$f" .txt)
		pkg=${pkg#go-}
		awk -v p="$pkg" '$1 ~ /^Benchmark/ { b = $1; sub(/-[0-9]+$/, "", b); for (i = 3; i < NF; i++) if ($(i+1) == "events/s") v[b] = v[b] " " $i }
			END { for (b in v) { n = split(v[b], a, " ")
				for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
				m = (n % 2 == 0) ? (a[n/2] + a[n/2+1]) / 2 : a[(n+1)/2]
				printf "%-72s %12.0f %12.0f – %.0f\n", p " " b, m, a[1], a[n] } }' "$f" | sort
	done
fi
