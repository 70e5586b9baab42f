"""Peer (PyTorch / cuDNN) benchmark cases, one module per jitune family. Each module defines
cases() -> list of dicts: {"case": name, "run": callable, "check": callable -> bool, "bytes": int,
"flops": int (optional), "op": text}. bench/peer_torch.py times them with jitune_bench's protocol."""
