#!/usr/bin/env bash
# Search quality over every development query set, on its own catalog and on combined.jsonl.
#
#   bench/eval-all.sh [--profile release|profiling|debug] [--data DIR] [--out DIR] [--repeat N]
#
# Runs the `anygpt-eval` developer binary (bench/eval.rs; see bench/README.md) six times and prints one
# Markdown table: Recall@1/5/10, Cov@10, p50/p99 latency per set and catalog, then the mean
# Recall@5 over the six. Per-query rankings land in --out (default /tmp/eval-all) as
# <set>-<catalog>.jsonl, for comparing two runs. Build the binary first, e.g.
#   cargo build --profile profiling --bin anygpt-eval --target x86_64-unknown-linux-gnu
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
profile=release
data="$root/../shared/data"
out=/tmp/eval-all
repeat=5
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done
triple=${CARGO_BUILD_TARGET:-$(rustc -vV | sed -n 's/^host: //p')}
bin="$root/target/$triple/$profile/anygpt-eval"
[ -x "$bin" ] || { echo "no binary at $bin: build it first" >&2; exit 1; }
mkdir -p "$out"
summaries=()
for pair in livemcpbench-step:livemcpbench livemcpbench-task:livemcpbench mcptoolbench:mcptoolbench; do
  set=${pair%%:*}; own=${pair##*:}
  for catalog in "$own" combined; do
    summaries+=("$set $catalog $("$bin" --catalog "$data/catalogs/$catalog.jsonl" \
      --queries "$data/queries/dev/$set.jsonl" --out "$out/$set-$catalog.jsonl" \
      --limit 10 --repeat "$repeat" --json)")
  done
done
printf '%s\n' "${summaries[@]}" | node -e '
const rows = require("fs").readFileSync(0, "utf8").trim().split("\n").map((line) => {
  const [set, catalog, ...json] = line.split(" ");
  return { ...JSON.parse(json.join(" ")), set, catalog };
});
const f = (x) => (x == null ? "-" : x.toFixed(3).replace(/^0/, ""));
console.log("| set | catalog | R@1 | R@5 | R@10 | Cov@10 | p50 ms | p99 ms |");
console.log("|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  console.log(`| ${r.set} (${r.count}) | ${r.catalog} | ${f(r["recall@1"])} | ${f(r["recall@5"])} | ` +
    `${f(r["recall@10"])} | ${f(r["cov@10"])} | ${r.p50_ms.toFixed(3)} | ${r.p99_ms.toFixed(3)} |`);
}
const mean = (k) => rows.reduce((s, r) => s + r[k], 0) / rows.length;
console.log(`\nmean over the six: R@1 ${mean("recall@1").toFixed(3)}  R@5 ${mean("recall@5").toFixed(3)}  R@10 ${mean("recall@10").toFixed(3)}`);
'
