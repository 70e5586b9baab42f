#!/usr/bin/env python3
"""Audit of the compiled kernels' global stores (2026-11-29): a 16-byte store written as `*reinterpret_cast<uint4*>(p)
= v` came out of NVRTC as four 4-byte STG.E at offsets 0 / 4 / 8 / 12 of one base in conv2d repack 2 / 3's copy
(bench/RESULTS.md, twenty-fourth session: four times the L2 sectors, the copy instruction-bound). This lists, per
binary of a jitune binary folder (the build's shipped/kernels, or a user cache's), the kernel, its 16-byte stores
(STG.E.128) and its runs of four 4-byte stores at offsets o, o + 4, o + 8, o + 12 of one base register: candidates
for the same split, to read in the SASS (not every run is one: an element-by-element path on purpose looks the same).
Needs cuobjdump (the CUDA toolkit's; on a machine without it, `pip download nvidia-cuda-cuobjdump` and unzip).
    python3 bench/experiments/sass_stores.py [--cuobjdump PATH] [--all] [FOLDER]
FOLDER defaults to build/shipped/kernels. A binary is jitune's format (runtime/binary_cache.cpp: magic, the lowered
name, the cubin, a checksum); the cubin is what cuobjdump reads.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

STORE = re.compile(r"STG\.E([.\w]*)\s+desc\[[^\]]+\]\[(R\d+)\.64([+-]0x[0-9a-f]+)?\]")


def cubin_of(path):
    """(lowered name, cubin bytes) of one jitune binary, or None."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"JITUNEB2":
        return None
    (name_len,) = struct.unpack_from("<I", data, 8)
    name = data[12:12 + name_len].decode(errors="replace")
    (image_len,) = struct.unpack_from("<Q", data, 12 + name_len)
    start = 20 + name_len
    return name, data[start:start + image_len]


def audit(sass):
    """(16-byte stores, 4-byte stores, runs of four 4-byte stores at o .. o + 12 of one base)."""
    wide = narrow = 0
    offsets = {}
    for m in STORE.finditer(sass):
        width = m.group(1)
        if ".128" in width:
            wide += 1
        elif ".64" not in width and ".U16" not in width and ".U8" not in width and ".S16" not in width:
            narrow += 1
            offsets.setdefault(m.group(2), set()).add(int(m.group(3), 16) if m.group(3) else 0)
    runs = sum(1 for offs in offsets.values() for o in offs if o % 16 == 0 and {o + 4, o + 8, o + 12} <= offs)
    return wide, narrow, runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", nargs="?", default=os.path.join("build", "shipped", "kernels"))
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump")
    ap.add_argument("--all", action="store_true", help="list every kernel, not only those with runs")
    args = ap.parse_args()
    if not os.path.exists(args.cuobjdump):
        sys.exit(f"sass_stores.py: no cuobjdump at {args.cuobjdump} (--cuobjdump PATH)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        for entry in sorted(os.listdir(args.folder)):
            got = cubin_of(os.path.join(args.folder, entry))
            if got is None:
                continue
            name, image = got
            with open(cubin, "wb") as f:
                f.write(image)
            sass = subprocess.run([args.cuobjdump, "-sass", cubin], capture_output=True, text=True).stdout
            rows.append((name, entry[:12]) + audit(sass))
    shown = [r for r in rows if args.all or r[4] > 0]
    print(f"{len(rows)} binaries, {len(shown)} listed (16-byte stores / 4-byte stores / runs of four at o .. o + 12)")
    for name, key, wide, narrow, runs in sorted(shown, key=lambda r: -r[4]):
        print(f"{runs:3d} runs  {wide:4d} / {narrow:4d}  {key}  {name[:150]}")


if __name__ == "__main__":
    main()
