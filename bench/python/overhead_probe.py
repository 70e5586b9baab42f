"""Per-call host overhead of the pieces a Python op over jitune's C ABI is built from, on the GPU machine.

Measures (median of 7 rounds, each 20000 calls, synchronised once per round): torch.add on small CUDA tensors
(the peer), an identity-cost torch.library.custom_op, a low-level torch.library.Library op with a CUDA Python
kernel, a ctypes call with 10 arguments, data_ptr(), and the two ways to read the current stream. Decides how
jitune.torch registers its ops (docs/python.md).
usage: python3 bench/python/overhead_probe.py
"""
import ctypes
import statistics
import time

import torch

N_CALLS = 20000
ROUNDS = 7


def per_call_us(fn):
    fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(N_CALLS):
            fn()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) / N_CALLS * 1e6)
    return statistics.median(rounds)


def main():
    x = torch.randn(1024, device="cuda")
    y = torch.randn(1024, device="cuda")
    out = torch.empty_like(x)
    results = {}
    results["torch.add(x, y)"] = per_call_us(lambda: torch.add(x, y))
    results["torch.add(x, y, out=out)"] = per_call_us(lambda: torch.add(x, y, out=out))

    @torch.library.custom_op("jitune_probe::noop_out", mutates_args=("out",))
    def noop_out(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        pass

    @torch.library.custom_op("jitune_probe::add_new", mutates_args=())
    def add_new(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(a)

    results["custom_op noop (mutates out)"] = per_call_us(lambda: noop_out(x, y, out))
    results["custom_op returning empty_like"] = per_call_us(lambda: add_new(x, y))
    results["torch.ops custom_op returning empty_like"] = per_call_us(lambda: torch.ops.jitune_probe.add_new(x, y))

    lib = torch.library.Library("jitune_probe2", "DEF")
    lib.define("add(Tensor a, Tensor b) -> Tensor")

    def add_cuda(a, b):
        return torch.empty_like(a)

    lib.impl("add", add_cuda, "CUDA")
    op = torch.ops.jitune_probe2.add.default
    results["Library.impl CUDA op returning empty_like"] = per_call_us(lambda: op(x, y))
    results["torch.empty_like"] = per_call_us(lambda: torch.empty_like(x))

    libc = ctypes.CDLL(None)
    f = libc.memcmp  # any C function; called with three arguments
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    f.restype = ctypes.c_int
    buf = ctypes.create_string_buffer(16)
    a = ctypes.addressof(buf)
    results["ctypes call, 3 args"] = per_call_us(lambda: f(a, a, 0))
    g = libc.snprintf
    results["ctypes call, 10 untyped args"] = per_call_us(lambda: g(None, 0, b"%d%d%d%d%d%d%d%d", 1, 2, 3, 4, 5, 6, 7, 8))
    results["x.data_ptr()"] = per_call_us(lambda: x.data_ptr())
    results["torch.cuda.current_stream().cuda_stream"] = per_call_us(lambda: torch.cuda.current_stream().cuda_stream)
    dev = x.device.index
    results["torch._C._cuda_getCurrentRawStream(i)"] = per_call_us(lambda: torch._C._cuda_getCurrentRawStream(dev))
    results["x.shape / dtype / is_contiguous()"] = per_call_us(lambda: (x.shape, x.dtype, x.is_contiguous()))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| piece | µs per call |\n|---|---|")
    for k, v in results.items():
        print(f"| {k} | {v:.2f} |")


if __name__ == "__main__":
    main()
