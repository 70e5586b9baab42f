# Which Winograd variants on TF32 tensor cores would hold conv2d's TF32 tolerance? winograd_tf32_error.py's simulation
# (same workload values, points and tolerance; its helpers are loaded from it) for: F(4x4) with U and V truncated
# (what the tensor cores read) or rounded to nearest first (cvt.rna.tf32.f32, free in the transform pass), F(4x4) with
# V split into two TF32 terms (two MMAs a product), F(4x4) in 3xTF32 (three MMAs: float32's accuracy), F(2x2) truncated
# and rounded, and the direct convolution on TF32 inputs both ways. Prints, per C, the largest error over the
# tolerance and its standard deviation. Usage: python3 bench/experiments/winograd_tf32_variants.py (a few minutes).
import numpy as np, sys
import os
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "winograd_tf32_error.py")).read().split('# sanity')[0])
def tf32r(a):  # round to nearest (ties away), as cvt.rna.tf32.f32
    b = np.asarray(a, np.float32).view(np.uint32)
    b = (b + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return b.view(np.float32).astype(np.float64)
BT2 = np.array([[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]],float)
G2 = np.array([[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]])
AT2 = np.array([[1,1,1,0],[0,1,-1,-1]],float)
for C in (64, 256, 512):
    tiles = 1500
    d = rnd((tiles, C, 6, 6)); g = rnd((tiles, C, 3, 3))
    direct = np.zeros((tiles, 4, 4))
    for i in range(4):
        for j in range(4):
            direct[:, i, j] = np.einsum('tcrs,tcrs->t', d[:, :, i:i+3, j:j+3], g)
    terms = C * 9
    tol = 4e-6 * terms + 2**-10 * 32 * np.sqrt(terms) + 1e-5 * np.abs(direct)
    f32 = lambda a: a.astype(np.float32).astype(np.float64)
    V = f32(np.einsum('ab,tcbe,fe->tcaf', BT, d, BT)); U = f32(np.einsum('ab,tcbe,fe->tcaf', G, g, G))
    def y4(Uq, Vq): return np.einsum('ia,tab,jb->tij', AT, np.einsum('tcab,tcab->tab', Uq, Vq), AT)
    res = {}
    res['F4 trunc'] = y4(tf32(U), tf32(V))
    res['F4 rna'] = y4(tf32r(U), tf32r(V))
    Vb = tf32r(V); Vs = tf32r(V - Vb)
    res['F4 rna U, 2xV'] = y4(tf32r(U), Vb) + y4(tf32r(U), Vs)
    Ub = tf32r(U); Us = tf32r(U - Ub)
    res['F4 3xTF32'] = y4(Ub, Vb) + y4(Ub, Vs) + y4(Us, Vb)
    # F(2x2): 4 tiles of 2x2 in the 4x4 output; d sub-windows 4x4
    y2 = np.zeros((tiles,4,4)); y2r = np.zeros((tiles,4,4))
    U2 = f32(np.einsum('ab,tcbe,fe->tcaf', G2, g, G2))
    for bi in range(2):
        for bj in range(2):
            dd = d[:, :, 2*bi:2*bi+4, 2*bj:2*bj+4]
            V2 = f32(np.einsum('ab,tcbe,fe->tcaf', BT2, dd, BT2))
            y2[:, 2*bi:2*bi+2, 2*bj:2*bj+2] = np.einsum('ia,tab,jb->tij', AT2, np.einsum('tcab,tcab->tab', tf32(U2), tf32(V2)), AT2)
            y2r[:, 2*bi:2*bi+2, 2*bj:2*bj+2] = np.einsum('ia,tab,jb->tij', AT2, np.einsum('tcab,tcab->tab', tf32r(U2), tf32r(V2)), AT2)
    res['F2 trunc'] = y2; res['F2 rna'] = y2r
    dt = np.zeros((tiles,4,4)); dr = np.zeros((tiles,4,4))
    for i in range(4):
        for j in range(4):
            dt[:, i, j] = np.einsum('tcrs,tcrs->t', tf32(d[:, :, i:i+3, j:j+3]), tf32(g))
            dr[:, i, j] = np.einsum('tcrs,tcrs->t', tf32r(d[:, :, i:i+3, j:j+3]), tf32r(g))
    res['direct trunc'] = dt; res['direct rna'] = dr
    print(f"C={C} outputs {tiles*16}: " + "; ".join(f"{k} {np.max(np.abs(y-direct)/tol):.2f} (sd {np.std((y-direct)/tol):.3f})" for k, y in res.items()), flush=True)
