#!/usr/bin/env bash
# gpu.import_verify: `jitune cache import --verify` re-times what it imports for this GPU. A record of this device
# that claims a time well below what the GPU does is reported "not reproduced" and stored with the time measured
# here, never the claim; a record of another device is added untouched; a record already stored is never
# replaced by a claim. Exit 77 (skipped) without a GPU.
#   usage: tests/gpu/import_verify.sh JITUNE_CLI SHIPPED_JSONL
set -euo pipefail
cli=$1
shipped=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export JITUNE_CACHE_DIR=$work/cache
"$cli" --json devices >"$work/devices.json" || { echo "import_verify: no GPU (skipped)"; exit 77; }
python3 - "$shipped" "$work" <<'PY'
import json, sys
shipped, work = sys.argv[1], sys.argv[2]
dev = json.load(open(work + "/devices.json"))["devices"][0]
cc = int(dev["arch"].removeprefix("sm_"))
want = "dtype=float32;expr=z = x * y;n=134217728"
rec = next(json.loads(l) for l in open(shipped) if json.loads(l)["family"] == "elementwise"
           and json.loads(l)["signature"] == want)
mine = dict(rec, device_name=dev["name"], cc=cc, sm_count=dev["sm_count"], time_us=200.0)  # 1.6 GB in 200 us: no GPU of today
other = dict(rec, device_name="NVIDIA Imaginary GPU", sm_count=7, time_us=150.0)
with open(work + "/claims.jsonl", "w") as f:
    f.write(json.dumps(mine) + "\n" + json.dumps(other) + "\n")
PY
"$cli" --json cache import --verify "$work/claims.jsonl" >"$work/verify.json"
"$cli" --json cache list >"$work/list.json"
# A second --verify of the same claims: the stored (measured) record must survive the claim.
"$cli" --json cache import "$work/claims.jsonl" >"$work/plain.json"
"$cli" --json cache list >"$work/list2.json"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
v = json.load(open(work + "/verify.json"))
assert v["retimed"] == 1 and v["not_reproduced"] == 1 and v["failed"] == 0, v
row = v["verified"][0]
assert row["measured_us"] > 1.25 * row["claimed_us"] and not row["reproduced"] and row["stored"], row
assert v["other_devices"]["added"] == 1 and v["rejected"] == 0, v
def user_rows(path):
    return [r for r in json.load(open(path)) if r["source"].endswith("tuning.sqlite")]
rows = user_rows(work + "/list.json")
here = [r for r in rows if r["device_name"] != "NVIDIA Imaginary GPU"]
there = [r for r in rows if r["device_name"] == "NVIDIA Imaginary GPU"]
assert len(here) == 1 and here[0]["time_us"] > 250, here        # measured here, not the 200 us claim
assert len(there) == 1 and there[0]["time_us"] == 150.0, there   # another GPU's record: imported as it came
p = json.load(open(work + "/plain.json"))
assert p["kept"] == 2 and p["replaced"] == 0, p
again = [r for r in user_rows(work + "/list2.json") if r["device_name"] != "NVIDIA Imaginary GPU"]
assert again[0]["time_us"] == here[0]["time_us"], again
print(f"import_verify: claimed {row['claimed_us']:.1f} us, measured {row['measured_us']:.1f} us here "
      f"({row['winner']} stored at {row['winner_us']:.1f} us); other device added; plain re-import kept both")
PY
