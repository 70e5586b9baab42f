# Would Winograd F(4x4, 3x3) with its GEMMs on TF32 tensor cores hold conv2d's TF32 tolerance? A simulation on the
# family's workload values (magnitudes (1 + u) * 2^-2..2^1, random signs): U = G g Gt and V = Bt d B (the kernels'
# points 0, +-1/2, +-2) rounded to float32, then truncated to TF32 (10 mantissa bits, as the tensor cores read them),
# products summed exactly, Y = At M A; the error of Y against the exact direct sum over the family's TF32 tolerance
# (atol 4e-6 * terms + 2^-10 * 32 * sqrt(terms), rtol 1e-5), beside the direct convolution on TF32 inputs (what that
# tolerance was made for). Usage: python3 bench/experiments/winograd_tf32_error.py (about a minute, numpy only).
import numpy as np
rng = np.random.default_rng(7)
BT = np.array([[1,0,-4.25,0,1,0],[0,-2,-4,0.5,1,0],[0,2,-4,-0.5,1,0],[0,-0.5,-0.25,2,1,0],[0,0.5,-0.25,-2,1,0],[0,1,0,-4.25,0,1]])
G = np.array([[1,0,0],[-8/15,-4/15,-2/15],[-8/15,4/15,-2/15],[1/30,2/30,4/30],[1/30,-2/30,4/30],[0,0,1]])
AT = np.array([[1,1,1,1,1,0],[0,0.5,-0.5,2,-2,0],[0,0.25,0.25,4,4,0],[0,0.125,-0.125,8,-8,1]])
def rnd(shape):
    bits = rng.integers(0, 2**63, size=shape, dtype=np.int64).astype(np.uint64)
    mag = (1 + (bits >> np.uint64(40)).astype(np.float64) / 2**24) * 2.0 ** ((bits & np.uint64(3)).astype(np.int64) - 2)
    return np.where(bits & np.uint64(4), -mag, mag).astype(np.float32).astype(np.float64)
def tf32(a):  # truncate float32 to 10 mantissa bits
    b = np.asarray(a, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return b.view(np.float32).astype(np.float64)
# sanity: Winograd exact in float64 equals direct
for C in (64, 128, 256, 512):
    tiles = 4000 if C <= 128 else 1500
    d = rnd((tiles, C, 6, 6)); g = rnd((tiles, C, 3, 3))
    direct = np.zeros((tiles, 4, 4))
    for i in range(4):
        for j in range(4):
            direct[:, i, j] = np.einsum('tcrs,tcrs->t', d[:, :, i:i+3, j:j+3], g)
    V = np.einsum('ab,tcbe,fe->tcaf', BT, d, BT).astype(np.float32).astype(np.float64)
    U = np.einsum('ab,tcbe,fe->tcaf', G, g, G).astype(np.float32).astype(np.float64)
    exact = np.einsum('ia,tab,jb->tij', AT, np.einsum('tcab,tcab->tab', U, V), AT)
    M32 = np.einsum('tcab,tcab->tab', U, V)
    Mtf = np.einsum('tcab,tcab->tab', tf32(U), tf32(V))
    y_fp = np.einsum('ia,tab,jb->tij', AT, M32, AT)
    y_tf = np.einsum('ia,tab,jb->tij', AT, Mtf, AT)
    # direct with TF32 inputs (what the family's TF32 tolerance was built for)
    dt, gt = tf32(d), tf32(g)
    direct_tf = np.zeros((tiles, 4, 4))
    for i in range(4):
        for j in range(4):
            direct_tf[:, i, j] = np.einsum('tcrs,tcrs->t', dt[:, :, i:i+3, j:j+3], gt)
    terms = C * 9
    tol_fp = 4e-6 * terms + 1e-5 * np.abs(direct)
    tol_tf = 4e-6 * terms + 2**-10 * 32 * np.sqrt(terms) + 1e-5 * np.abs(direct)
    r = lambda y, tol: np.max(np.abs(y - direct) / tol)
    s = lambda y, tol: np.std((y - direct) / tol)
    print(f"C={C}: outputs {tiles*16}; max err/tol: F(4x4) float32 {r(y_fp, tol_fp):.2f}; "
          f"F(4x4) TF32 U,V vs TF32 tol {r(y_tf, tol_tf):.2f} (sd {s(y_tf, tol_tf):.3f}); direct TF32 vs TF32 tol {r(direct_tf, tol_tf):.3f} (sd {s(direct_tf, tol_tf):.4f})")
