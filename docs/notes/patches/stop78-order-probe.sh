# Stop 78's order probe (docs/performance/h100-2026-12-07-stop78/prefill-mixer-order.md): on the GPU machine,
# UNTIL=220 bash .gpu/diag78.sh with the diagnostic build as .gpu/diag.tar.xz and the fix's as .gpu/fix.tar.xz.
# --- .gpu/diag78.sh ---
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
mkdir -p $OUT
BUNDLE=.gpu/fix.tar.xz bash tools/cuda/run_on_device.sh "timeout 200 \$BUILD/bifocal_cuda_tests --gtest_filter='CudaModel.AFreshContext*:CudaModel.BenchMeasures*:CudaModel.DecodeEqualsPrefill:CudaModel.Golden*Bf16' > $OUT/fix_tests.txt 2>&1; echo tests exit \$?; tail -25 $OUT/fix_tests.txt"
ls /tmp/bifocal-gpu-fix/bin/
BUNDLE=.gpu/diag.tar.xz bash tools/cuda/run_on_device.sh 'bash .gpu/diag78_inner.sh'
# --- .gpu/diag78_inner.sh (call B's variants; call A ran alone, table, reversed, own512gen1 and
# own512gen64 on main's build, with both mixers alone) ---
# Stop 78 diagnostic: is Bifocal's 1K prefill slower after a decode session in the same process?
set -u
out=$OUT/diag; mkdir -p $out
csv=$out/prefill.csv
echo "round|variant|shape|mixer|context|prefill" > $csv
began=$(date +%s)
run() {  # variant shape args...
  local variant=$1 shape=$2; shift 2
  local binary=$BUILD/bifocal
  [ "${variant#fix}" != "$variant" ] && binary=/tmp/bifocal-gpu-fix/bin/bifocal
  "$binary" bench --shape $shape "$@" --out $out/last > $out/log.txt 2>&1 || { echo "FAILED $variant $shape"; tail -3 $out/log.txt; }
  grep -E "at [0-9]+ tokens: decode" $out/log.txt | sed -E 's/^bifocal: (.*) at ([0-9]+) tokens: .*prefill ([0-9]+) tok\/s.*/\1|\2|\3/' |
    while IFS="|" read m c p; do echo "$round|$variant|$shape|$m|$c|$p" >> $csv; done
}
for round in $(seq 1 40); do
  [ $(( $(date +%s) - began )) -ge ${UNTIL:-230} ] && break
  for shape in qwen3-4b qwen3.5-4b-like; do
    if [ $shape = qwen3-4b ]; then B="bifocal:window=448,state=kv"; else B="bifocal:window=320,state=kv"; fi
    S="swa:window=576,sink=learned"
    run alone $shape --mixer $B --context 1k --gen 8 --repeat 3
    run table $shape --mixer $S --mixer $B --context 512,1k --gen 8 --repeat 3
    BIFOCAL_DIAG_RESET=1 run table_reset $shape --mixer $S --mixer $B --context 512,1k --gen 8 --repeat 3
    BIFOCAL_DIAG_SCRATCH_GB=8 run alone_scratch8 $shape --mixer $B --context 1k --gen 8 --repeat 3
    run fix_table $shape --mixer $S --mixer $B --context 512,1k --gen 8 --repeat 3
    run reversed $shape --mixer $B --mixer $S --context 1k --gen 8 --repeat 3
  done
  echo "round $round done at $(( $(date +%s) - began )) s"
done
python3 - "$csv" <<'PY'
import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="|"))
groups = {}
for r in rows:
    if r["context"] != "1024": continue
    groups.setdefault((r["shape"], r["mixer"], r["variant"]), []).append(float(r["prefill"]))
for k in sorted(groups):
    v = groups[k]
    print(f"{k[0]:18s} {k[1]:44s} {k[2]:12s} n={len(v):2d} median={st.median(v):8.0f} min={min(v):7.0f} max={max(v):7.0f}")
PY
