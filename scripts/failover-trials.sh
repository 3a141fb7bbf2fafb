#!/usr/bin/env bash
# Failover trials with each client (issue 27; docs/benchmarks.md, "Failover
# under a second"): the leader-fault scenarios, run with their publishers
# going through the Go client, the TypeScript client in Node and the CLI
# (`rewind scenario run --client`), each client given every member with its
# defaults. Each run prints a line per fault with its failover time on every
# partition (from the fault's start to the next acknowledged publish); this
# script keeps those lines, one file per run, and ends with a table.
#
#   SCENARIOS  default "leader-kill-loop pause-leader isolate-leader"
#   CLIENTS    default "go ts cli"
#   SEEDS      default "1 2 3 4 5" (each short run has 2-3 faults)
#   OUT        default /tmp/failover-trials (reports and lines)
#   REWIND     a rewind binary (default: built from this checkout)
#
#   scripts/failover-trials.sh
#   SCENARIOS=isolate-leader CLIENTS=go SEEDS="1 2 3 4 5 6 7 8 9 10" scripts/failover-trials.sh
#
# The bounds are checked (failover_within 1s): a run over the bound says
# FAIL, and the lines show where.
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)
SCENARIOS=${SCENARIOS:-leader-kill-loop pause-leader isolate-leader}
CLIENTS=${CLIENTS:-go ts cli}
SEEDS=${SEEDS:-1 2 3 4 5}
OUT=${OUT:-/tmp/failover-trials}
mkdir -p "$OUT"
: >"$OUT/faults.txt"
if [ -z "${REWIND:-}" ]; then
	REWIND=$OUT/rewind
	(cd "$HERE" && go build -o "$REWIND" ./cmd/rewind) || exit 1
fi
case " $CLIENTS " in
*" ts "*)
	(cd "$HERE/sdk/ts" && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm run --silent build) || exit 1
	;;
esac

for sc in $SCENARIOS; do
	for cl in $CLIENTS; do
		for seed in $SEEDS; do
			run=$OUT/$sc-$cl-$seed
			rm -rf "$run"
			"$REWIND" scenario run "$sc" --short --seed "$seed" --client "$cl" --ts-client "$HERE/sdk/ts" \
				--report "$run" >"$run.log" 2>&1
			verdict=$(grep -o '): \(PASS\|FAIL\)' "$run.log" | head -1 | tr -d '): ')
			echo "== $sc $cl seed $seed: ${verdict:-no verdict} (load $(cut -d' ' -f1 /proc/loadavg))"
			grep '^fault [0-9]' "$run.log" | sed "s/^/$sc $cl $seed: /" | tee -a "$OUT/faults.txt"
		done
	done
done

# The table: the worst partition of each fault, in the order run; * marks a
# fault healed after the workload ended (measured up to the workload's end).
echo
echo "| scenario | client | failover of each fault, worst partition (s) |"
echo "|---|---|---|"
for sc in $SCENARIOS; do
	for cl in $CLIENTS; do
		figs=$(grep "^$sc $cl " "$OUT/faults.txt" |
			awk '{ for (i = 1; i < NF; i++) if ($i == "failover") { f = $(i + 1) } ; if ($0 ~ /outlasted/) f = f "*"; print f }' |
			paste -sd, - | sed 's/,/, /g')
		echo "| $sc | $cl | $figs |"
	done
done
