#!/usr/bin/env bash
# Measures the memory of N appends of 4 MiB bodies sent at once
# (api BenchmarkLargeAppends), each case in a process of its own so that
# one case's memory does not hide the next's; RUNS times each. The figures
# are in docs/benchmarks.md ("Large bodies at once").
#
# Usage: bash bench/large_appends.sh [case-filter]   e.g. bash bench/large_appends.sh appends=24
#
# Environment (defaults in brackets):
#   RUNS [3]   runs of each case
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
filter=${1:-}
go test -c -o /tmp/tether-api-bench.test ./api
for shape in 4x1MB 4000x1KB; do
	for n in 6 24; do
		for budget in off 8MiB 4MiB; do
			c="shape=$shape/appends=$n/budget=$budget"
			[[ -z $filter || $c == *$filter* ]] || continue
			for _ in $(seq "$RUNS"); do
				(cd api && /tmp/tether-api-bench.test -test.run '^$' -test.bench "LargeAppends/$c\$" -test.benchtime 1x) | grep '^BenchmarkLargeAppends' || true
			done
		done
	done
done
rm -f /tmp/tether-api-bench.test
