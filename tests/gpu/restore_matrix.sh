#!/usr/bin/env bash
# Issue 9's restore benchmark on a real NVIDIA GPU, side by side in one run: kreplay's restore
# per footprint (64 MiB … 8 GiB) and dirty fraction (0, 0.1, 1, 10, 100% of 4 KiB pages
# written) in each restore mode, then the copy ceilings, kreplay's hashing pass and CUPTI's
# checkpoint API on the same buffers (tests/gpu/restore_bench.cu). Binaries from .gpu-carry/
# (`cargo xtask gpu-test --build-only`). Prints RESULT lines and a PASS/FAIL per run (the
# program's device-side sum must be one pass's worth: every restore was complete).
#   bash tests/gpu/restore_matrix.sh [MIB...]
# MODES="name:flags|..." limits the kreplay modes, PERMILLES="0 1000" the dirty fractions;
# SKIP_CUPTI=1 leaves CUPTI out of restore_bench.
set -u
C=.gpu-carry
K=${KREPLAY_BIN:-$C/kreplay}
PASSES=${PASSES:-6}
W=$(mktemp -d)
fails=0
sizes=${*:-64 256 1024 4096 8192}
permilles=${PERMILLES:-0 1 10 100 1000}
echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), $(nvcc --version | tail -1), $(date -u)"
nvcc -O2 -arch=sm_90 -o $W/replay_cases tests/gpu/replay_cases.cu || exit 1
# The hash kernel against the one it replaced, the comparison kernel and the copy ceilings,
# with its own correctness checks (PASS/FAIL lines).
nvcc -O3 -arch=sm_90 -o $W/hash_bench tests/gpu/hash_bench.cu || exit 1
for mib in 1024 8192; do $W/hash_bench $mib || fails=$((fails+1)); done
for mib in $sizes; do
  for pm in $permilles; do
    modes="default:|full:--restore full|pinned_full:--snapshot-placement pinned --restore full"
    case $mib in 1024|4096|8192) modes="$modes|compare:--device-check compare|pinned:--snapshot-placement pinned";; esac
    # MODES="name:flags|..." runs only those (e.g. MODES="default:|full:--restore full").
    modes=${MODES:-$modes}
    IFS='|' read -ra list <<< "$modes"
    for m in "${list[@]}"; do
      name=${mib}_${pm}_${m%%:*}
      t0=$(date +%s.%N)
      KREPLAY_LOG=warn $K replay --passes $PASSES --kernel touch_strided ${m#*:} -o $W/r.pftrace -- \
        $W/replay_cases footprint $mib $pm > $W/out 2> $W/err
      rc=$?
      t1=$(date +%s.%N)
      touched=$(awk '$1=="touched"{print $2}' $W/out); sum=$(awk '$1=="sum"{print $2}' $W/out)
      if [ $rc -eq 0 ] && [ -n "$touched" ] && [ "$sum" = "$touched" ]; then echo "PASS fp_$name (sum $sum)"; else
        echo "FAIL fp_$name: rc $rc, touched '$touched', sum '$sum'"; tail -5 $W/err; fails=$((fails+1)); fi
      # kernel, mode, restores, bytes hashed, checked, restored, dirty chunks, check us, us per restore
      r=$(sed -n '/^restore  *mode/,/^$/p' $W/out | awk '$1=="touch_strided"')
      echo "RESULT fp_$name $r wall_s $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.1f", b-a}')"
    done
  done
done
CUPTI_H=$(find /usr/local/cuda/ /usr/local/cuda-*/ -name cupti_checkpoint.h 2>/dev/null | head -1)
CKPT_SO=$(find /usr/local/cuda/ /usr/local/cuda-*/ -name 'libcheckpoint.so' 2>/dev/null | head -1)
if [ -n "$CUPTI_H" ] && [ -n "$CKPT_SO" ] && nvcc -O2 -arch=sm_90 -I"$(dirname $CUPTI_H)" -o $W/restore_bench tests/gpu/restore_bench.cu -L"$(dirname $CKPT_SO)" -lcheckpoint -lcupti -lcuda; then
  for mib in $sizes; do LD_LIBRARY_PATH=$(dirname $CKPT_SO) $W/restore_bench $mib ${permilles// /,} || fails=$((fails+1)); done
else
  echo "SKIPPED restore_bench: cupti_checkpoint.h or libcheckpoint.so not found, or it did not build"
fi
echo "failures: $fails"
exit $fails
