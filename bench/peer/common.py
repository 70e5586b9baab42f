"""Helpers shared by the peer case modules."""
import torch


def nonzero(shape, dtype):
    """Random values with magnitude in [0.25, 4) and random sign: never zero (bench-cases.md, METHOD.md)."""
    x = torch.empty(shape, device="cuda", dtype=torch.float32).uniform_(0.25, 4.0)
    sign = torch.randint(0, 2, x.shape, device="cuda", dtype=torch.float32) * 2 - 1
    return (x * sign).to(dtype)
