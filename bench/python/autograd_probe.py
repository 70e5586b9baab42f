"""Per-call host overhead of the ways a torch.library op can carry autograd, on the GPU machine.

Every variant is the same low-level torch.library.Library op whose CUDA kernel returns torch.empty_like(a)
(the body of a jitune op without the ctypes call); only how autograd is attached differs:
  none:        no autograd kernel (the op cannot be differentiated; opcheck's autograd_registration fails);
  register:    torch.library.register_autograd (torch's generic Python autograd wrapper);
  redispatch:  our own Autograd kernel: autograd.Function when a grad is needed, else
               torch._C._AutoDispatchBelowAutograd() and the op again;
  keyset:      our own Autograd kernel taking the dispatch keyset: op.redispatch(keyset & after-autograd);
  direct:      our own Autograd kernel that, for plain CUDA tensors needing no grad, calls the CUDA kernel's
               Python function directly (subclasses such as FakeTensor take the redispatch path).
Median of 7 rounds of 20000 calls, synchronised once per round, inputs not requiring grad (the inference case),
then the same with requires_grad inputs (the training case) for the variants with autograd.
usage: python3 bench/python/autograd_probe.py
"""
import statistics
import time

import torch

N_CALLS = 20000
ROUNDS = 7
AFTER_AUTOGRAD = torch._C._after_autograd_keyset


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


def cuda_kernel(a, b):
    return torch.empty_like(a)


class Backward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return cuda_kernel(a, b)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


OPS = {}


def make(lib, name, autograd):
    lib.define(f"{name}(Tensor a, Tensor b) -> Tensor")
    lib.impl(name, cuda_kernel, "CUDA")
    op = getattr(torch.ops.jitune_ag, name).default
    OPS[name] = op
    if autograd == "register":
        def setup(ctx, inputs, output):
            pass

        torch.library.register_autograd(f"jitune_ag::{name}", lambda ctx, g: (g, g), setup_context=setup)
    elif autograd == "redispatch":
        def kernel(a, b):
            if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
                return Backward.apply(a, b)
            with torch._C._AutoDispatchBelowAutograd():
                return op(a, b)

        lib.impl(name, kernel, "Autograd")
    elif autograd == "keyset":
        def kernel(keyset, a, b):
            if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
                return Backward.apply(a, b)
            return op.redispatch(keyset & AFTER_AUTOGRAD, a, b)

        lib.impl(name, kernel, "Autograd", with_keyset=True)
    elif autograd == "direct":
        plain = torch.Tensor

        def kernel(a, b):
            if type(a) is plain and type(b) is plain:
                if not (a.requires_grad or b.requires_grad) or not torch.is_grad_enabled():
                    return cuda_kernel(a, b)
                return Backward.apply(a, b)
            with torch._C._AutoDispatchBelowAutograd():
                return op(a, b)

        lib.impl(name, kernel, "Autograd")
    return op


def main():
    x = torch.randn(1024, device="cuda")
    y = torch.randn(1024, device="cuda")
    xg = x.clone().requires_grad_()
    lib = torch.library.Library("jitune_ag", "DEF")
    results = [("torch.add(x, y)", per_call_us(lambda: torch.add(x, y)), per_call_us(lambda: torch.add(xg, y)))]
    for variant in ("none", "register", "redispatch", "keyset", "direct"):
        op = make(lib, f"op_{variant}", variant)
        plain = per_call_us(lambda: op(x, y))
        grad = per_call_us(lambda: op(xg, y)) if variant != "none" else float("nan")
        results.append((variant, plain, grad))
    with torch.inference_mode():
        results.append(("direct, inference_mode", per_call_us(lambda: OPS["op_direct"](x, y)), float("nan")))
        results.append(("torch.add, inference_mode", per_call_us(lambda: torch.add(x, y)), float("nan")))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| autograd variant | µs per call, no grad | µs per call, an input requires grad |\n|---|---|---|")
    for name, plain, grad in results:
        print(f"| {name} | {plain:.2f} | {grad:.2f} |")


if __name__ == "__main__":
    main()
