#!/usr/bin/env bash
# Issue 17: the suite's shards under a real Slurm, on this machine alone and without a GPU. Starts munge, slurmctld
# and slurmd (Debian's packages, installed here when missing; needs root) with a private configuration in a temporary
# folder, runs a job array whose tasks each list their share of the default suite (`jitune tune --suite default
# --plan --shard auto --json`: the same split a tuning array would tune, taken from SLURM_ARRAY_TASK_*), then checks
# that the tasks' lists together are the whole suite with no case in two of them; then a second array whose tasks
# share a claims folder (`--claims`, dry-run compiles of reduce_rows' cases) works on every case once; and stops the
# daemons.
#   usage: scripts/test-slurm.sh [build-folder] [tasks]   (default: build, 4)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
tasks=${2:-4}
jitune="$build/jitune"
[ -x "$jitune" ] || { echo "test-slurm: $jitune is not built (scripts/build.sh first)" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then
  echo "test-slurm: SKIPPED: starting slurmctld, slurmd and munged here needs root" >&2
  exit 0
fi
JITUNE_SLURM_DEPS=1 scripts/install-deps.sh

dir=$(mktemp -d /tmp/jitune-slurm.XXXXXX)
chmod 755 "$dir"
host=$(hostname -s)
stop() {
  [ -f "$dir/slurmd.pid" ] && kill "$(cat "$dir/slurmd.pid")" 2>/dev/null || true
  [ -f "$dir/slurmctld.pid" ] && kill "$(cat "$dir/slurmctld.pid")" 2>/dev/null || true
  [ -f "$dir/munged.pid" ] && kill "$(cat "$dir/munged.pid")" 2>/dev/null || true
  sleep 1
  rm -rf "$dir"
}
fail() {
  echo "test-slurm: FAILED: $*" >&2
  for log in slurmctld.log slurmd.log munged.log; do
    [ -f "$dir/$log" ] && { echo "--- $log (last lines)" >&2; tail -n 20 "$dir/$log" >&2; }
  done
  exit 1
}
trap stop EXIT

# munge: a key of our own and a private socket, so a machine's own munged (if any) is left alone.
mkdir -p "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 700 "$dir/munge"
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed" ||
  fail "munged did not start"

# Ports off Slurm's defaults, so a machine's own Slurm (if any) is left alone.
cat >"$dir/slurm.conf" <<EOF
ClusterName=jitune-ci
SlurmctldHost=$host
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
mkdir -p "$dir/state" "$dir/spool"
export SLURM_CONF="$dir/slurm.conf"
slurmctld -i || fail "slurmctld did not start"
slurmd || fail "slurmd did not start"
for _ in $(seq 60); do
  sinfo -h -o '%T' 2>/dev/null | grep -q -E '^(idle|mixed|allocated)' && break
  sleep 1
done
sinfo -h -o '%T' | grep -q -E '^(idle|mixed|allocated)' || fail "the node did not come up: $(sinfo 2>&1)"

# The job array: each task lists its shard. Array ids from 1 (Slurm's ids need not start at 0).
last=$tasks
sbatch --wait --array="1-$last" --output="$dir/shard_%a.json" --error="$dir/shard_%a.err" --chdir="$dir" \
  --wrap="'$jitune' --json tune --suite default --plan --shard auto" >/dev/null ||
  fail "the job array failed: $(cat "$dir"/shard_*.err 2>/dev/null)"
"$jitune" --json tune --suite default --plan >"$dir/whole.json"

python3 - "$dir" "$tasks" <<'EOF'
import collections, json, sys
folder, tasks = sys.argv[1], int(sys.argv[2])
key = lambda item: (item["family"], item["name"], item["signature"])
whole = [key(i) for i in json.load(open(f"{folder}/whole.json"))["items"]]
seen = collections.Counter()
for task in range(1, tasks + 1):
    shard = json.load(open(f"{folder}/shard_{task}.json"))
    assert shard["source"] == "Slurm job array", shard["source"]
    assert shard["shards"] == tasks and shard["shard"] == task - 1, (shard["shard"], shard["shards"])
    seen.update(key(i) for i in shard["items"])
    print(f"task {task}: shard {shard['shard']} of {shard['shards']}, {len(shard['items'])} cases, "
          f"{100 * shard['cost'] / shard['total_cost']:.1f}% of the estimated cost")
missing = [k for k in whole if k not in seen]
twice = [k for k, n in seen.items() if n > 1]
extra = [k for k in seen if k not in set(whole)]
assert not missing and not twice and not extra, (missing, twice, extra)
print(f"test-slurm: {tasks} array tasks cover the {len(whole)} default-suite cases, each exactly once")
EOF
# Work claims in a folder the tasks share: each task claims a case before it works on it (here a dry-run compile of
# a sample, no GPU), its own shard first, then the others' cases nobody has started. Together: every case once.
sbatch --wait --array="1-$last" --output="$dir/claims_%a.json" --error="$dir/claims_%a.err" --chdir="$dir" \
  --wrap="'$jitune' --json tune --suite default --family reduce_rows --dry-run --strategy random --budget 1 --shard auto --claims '$dir/claims'" \
  >/dev/null || fail "the claims array failed: $(cat "$dir"/claims_*.err 2>/dev/null)"
"$jitune" --json tune --suite default --family reduce_rows --plan >"$dir/reduce_rows.json"
python3 - "$dir" "$tasks" <<'EOF'
import collections, json, sys
folder, tasks = sys.argv[1], int(sys.argv[2])
whole = collections.Counter((i["family"], i["signature"]) for i in json.load(open(f"{folder}/reduce_rows.json"))["items"])
done = collections.Counter()
for task in range(1, tasks + 1):
    cases = json.load(open(f"{folder}/claims_{task}.json"))
    done.update((c["family"], c["signature"]) for c in cases)
    line = [l for l in open(f"{folder}/claims_{task}.err") if l.startswith("work claims")]
    assert line, f"task {task} printed no claims line"
    print(f"task {task}: {line[0].split('): ', 1)[1].strip()}")
assert done == whole, (sorted(set(whole) - set(done)), sorted(k for k, n in done.items() if n > 1))
print(f"test-slurm: {tasks} array tasks sharing a claims folder worked on the {len(whole)} reduce_rows cases, each once")
EOF
