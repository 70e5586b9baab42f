"""Every case jitune_bench times has a PyTorch / cuDNN peer case of the same name in bench/peer, and no peer case
is left without its jitune case: a suite row added to a family without its peer row would otherwise show up only
as a missing ratio in a GPU run's table (it did, for two conv2d rows). No GPU and no torch needed: the peer modules
are imported in a subprocess against a stand-in torch module (their cases() only name and size the cases; the
tensors are built by each case's setup, which this test never calls)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

_LIST_PEERS = r"""
import importlib, json, pkgutil, sys, types

class _Any:
    def __getattr__(self, name):
        return _Any()

    def __call__(self, *args, **kwargs):
        return _Any()

class _Stub(types.ModuleType):
    def __getattr__(self, name):
        return _Any()

for name in ("torch", "torch.nn", "torch.nn.functional"):
    sys.modules[name] = _Stub(name)
sys.path.insert(0, sys.argv[1])
import peer
names = {}
for m in pkgutil.iter_modules(peer.__path__):
    if m.name != "common":
        names[m.name] = [c["case"] for c in importlib.import_module("peer." + m.name).cases()]
print(json.dumps(names))
"""


def _bench():
    path = os.environ.get("JITUNE_BENCH") or str(REPO / "build" / "jitune_bench")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


@pytest.mark.skipif(_bench() is None, reason="needs build/jitune_bench (or set JITUNE_BENCH)")
def test_every_bench_case_has_its_peer_and_back():
    listed = subprocess.run([_bench(), "--list"], check=True, capture_output=True, text=True).stdout.splitlines()
    ours = {}
    for line in listed:
        family, name = line.split("\t")[:2]
        ours.setdefault(family, []).append(name)
    run = subprocess.run([sys.executable, "-c", _LIST_PEERS, str(REPO / "bench")], check=True, capture_output=True,
                         text=True)
    peers = json.loads(run.stdout)
    assert sum(len(v) for v in ours.values()) >= 100
    for family, names in ours.items():
        assert family in peers, f"bench/peer has no module for the {family} family"
        missing = sorted(set(names) - set(peers[family]))
        assert not missing, f"bench/peer/{family}.py has no case for {missing}: add its row"
    for family, names in peers.items():
        extra = sorted(set(names) - set(ours.get(family, [])))
        assert not extra, f"bench/peer/{family}.py times {extra}, which jitune_bench does not"
        assert len(names) == len(set(names)), f"bench/peer/{family}.py names a case twice"
