#!/usr/bin/env bash
# What a replayed dispatch costs on a CUDA program with a 1 GiB and an 8 GiB footprint of which
# each dispatch touches 16 MiB (tests/gpu/footprint.cu), at 2 and 10 passes, with the build in
# $C (default .gpu-carry) and, when $BASE is set, the same runs with the build there, side by
# side. Every run's checksums must equal the bare run's. Traces go to $OUT for
# tests/gpu/replay_phases.py (per-phase times beside the physical floor).
#
#   tests/gpu/replay_footprint.sh [DISPATCHES]     (default 20)
set -u
C=${C:-.gpu-carry}
BASE=${BASE:-}
OUT=${OUT:-/tmp/replay_footprint_out}
W=${W:-/tmp/replay_footprint}
D=${1:-20}
rm -rf "$W"; mkdir -p "$W" "$OUT"
echo "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null); $(uname -r); $(nproc) cpus; $(date -u)"
nvcc -O2 -arch=sm_90 -o $W/footprint tests/gpu/footprint.cu || exit 1
fail=0
for gib in 1 8; do
  $W/footprint $gib $D > $W/bare$gib.out 2>&1 || { echo "FAIL bare $gib"; cat $W/bare$gib.out; fail=1; continue; }
  want=$(grep checksum $W/bare$gib.out)
  for build in new base; do
    K=$C/kreplay
    if [ $build = base ]; then [ -n "$BASE" ] || continue; K=$BASE/kreplay; fi
    for p in 2 10; do
      name=${build}_${gib}g_p$p
      s=$(date +%s.%N)
      timeout 120 $K replay --passes $p --kernel axpy -o $OUT/$name.pftrace -- $W/footprint $gib $D > $W/$name.out 2> $W/$name.err
      rc=$?; e=$(date +%s.%N)
      got=$(grep checksum $W/$name.out)
      same=PASS; [ "$got" = "$want" ] || { same=FAIL; fail=1; }
      echo "RUN $name rc $rc wall_s $(awk -v a=$s -v b=$e 'BEGIN{printf "%.2f", b-a}') output_identical $same"
      sed -n '/^kernel  *dispatches/,$p' $W/$name.out | cut -c1-200 | head -8
      grep -v '^ *$' $W/$name.err | sort | uniq -c | sort -rn | head -3 | cut -c1-200
    done
  done
done
[ $fail = 0 ] && echo "replay_footprint: PASS" || echo "replay_footprint: FAIL"
exit $fail
