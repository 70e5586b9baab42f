#!/usr/bin/env bash
# Issue 17: jitune tune --devices on a 2-GPU host (run there from the repository root with the build carried as
# build-dev): a worker killed mid-run, then the default suite without conv2d on one GPU and on two, and the two
# stores compared per key. bench/RESULTS.md, 2026-11-26 evening (third session, continued) and 2026-11-27 (tenth
# session).
#   RUNS="kill one two compare" (default) picks the parts; FAMILIES="--family ..." the suite's families (default: all
#   but conv2d; FAMILIES=all: the whole suite). Each run gets its own empty JITUNE_CACHE_DIR; the wall lines carry the
#   CPU seconds of the run and its workers (user + system: NVRTC's compiles and the CPU references). The whole suite with conv2d takes about 380 s on one GPU and more than 300 s on two, over a call's
#   600 s: run RUNS="one" in one call and RUNS="two compare" in the next on the same warm machine (the stores in /tmp
#   stay while it is held).
rm -rf build && ln -s build-dev build && src=$(grep -m1 '^CMAKE_HOME_DIRECTORY' build/CMakeCache.txt|cut -d= -f2); mkdir -p "$(dirname "$src")"; ln -sfn "$PWD" "$src"; export JITUNE_CACHE_DIR=/tmp/jcm
build/jitune devices | head -4
RUNS=${RUNS:-kill one two compare}
[[ "${FAMILIES:-}" == all ]] && FAMILIES=" "
F=${FAMILIES:---family elementwise --family elementwise_view --family permute --family upsample_nearest2d --family scatter_add --family reduce_rows}
if [[ " $RUNS " == *" kill "* ]]; then
  # gpu 1's worker SIGKILLed mid-run.
  ( sleep 12; pkill -9 -f -- "--shard 1/2" && echo "killed gpu 1 worker" ) &
  build/jitune --cache /tmp/kill.sqlite tune --suite default --family elementwise --devices 0,1 > $OUT/kill.txt 2>&1; echo "kill run rc=$?"
  grep -v "candidates, best" $OUT/kill.txt | grep -E "^gpu|GPUs|killed|claims" ; wait
  build/jitune --cache /tmp/kill.sqlite cache export $OUT/kill.jsonl > /dev/null
  # Every case of the family is in the merged store once: the killed worker's unstarted cases and the one it was
  # tuning were taken over by the other worker (work claims).
  echo "merged store: $(wc -l < $OUT/kill.jsonl) records, $(python3 -c "import json; print(len({(r['family'], r['signature']) for r in map(json.loads, open('$OUT/kill.jsonl'))}))") distinct keys, of $(build/jitune --json tune --suite default --family elementwise --plan | python3 -c 'import json, sys; print(json.load(sys.stdin)["total_items"])') cases"
fi
if [[ " $RUNS " == *" one "* ]]; then
  rm -f /tmp/one.sqlite
  export JITUNE_CACHE_DIR=/tmp/jc-one
  { timeout ${LIMIT:-3000} /usr/bin/time -f "one GPU wall %e s, CPU %U s user %S s system" build/jitune --cache /tmp/one.sqlite tune --suite default $F ; } > $OUT/one.txt 2>&1
  grep -E "where the|wall" $OUT/one.txt | tail -2
fi
if [[ " $RUNS " == *" two "* ]]; then
  rm -f /tmp/two.sqlite
  export JITUNE_CACHE_DIR=/tmp/jc-two
  { /usr/bin/time -f "two GPUs wall %e s, CPU %U s user %S s system" build/jitune --cache /tmp/two.sqlite tune --suite default $F --devices 0,1 ; } > $OUT/two.txt 2>&1
  grep -E "^gpu [01]:|GPUs|wall|shared compiles|claims|where the" $OUT/two.txt | tail -12
fi
if [[ " $RUNS " == *" compare "* ]]; then
  build/jitune --cache /tmp/one.sqlite cache export $OUT/one.jsonl > /dev/null; build/jitune --cache /tmp/two.sqlite cache export $OUT/two.jsonl > /dev/null
  python3 - <<'PY'
import json,os
out=os.environ['OUT']
def load(f):
    return {(r['family'],r['signature']):r for r in map(json.loads,open(f))}
a=load(out+'/one.jsonl'); b=load(out+'/two.jsonl')
print('records one', len(a), 'two', len(b), 'common', len(set(a)&set(b)))
same=sum(1 for k in a if k in b and a[k]['config']==b[k]['config'])
rat=sorted(b[k]['time_us']/a[k]['time_us'] for k in a if k in b)
print('same winner config', same, 'time ratio two/one: median %.3f min %.3f max %.3f'%(rat[len(rat)//2],rat[0],rat[-1]))
print('within 2%%: %d of %d'%(sum(1 for x in rat if abs(x-1)<=0.02), len(rat)))
PY
fi
