// Kernel parameter layouts of the permute family, shared by the host (templates/permute/permute.cpp fills
// them) and the kernels (permute/permute.cuh). Plain structs of 64-bit words, so both compilers lay them out
// alike; no headers, so the file compiles under NVRTC and as host C++.
#pragma once

namespace jitune {
namespace pmt {

/// Most dims a permute takes (before and after simplification).
constexpr int kMaxRank = 8;

/// A divisor d >= 1 with its magic number for 32-bit indices: n / d == (umulhi(n, magic) + n) >> shift for
/// every n < 2^31 (the host's make_divisor computes magic and shift). 64-bit indices divide by `value`.
struct Divisor {
  unsigned long long value;  ///< d.
  unsigned long long magic;  ///< Bits 0-31: magic; bits 32-39: shift.
};

/// permute_general: out[o] = in[source(o)] for every output unit o < count.
struct GeneralParams {
  unsigned long long out;                   ///< Output pointer.
  unsigned long long in;                    ///< Input pointer.
  unsigned long long count;                 ///< Units to write.
  Divisor dims[kMaxRank];                   ///< Output dims (units), outermost first.
  unsigned long long in_strides[kMaxRank];  ///< Input stride (units) of each output dim.
};

/// permute_tiled: the plane (rows, cols) of every batch index is transposed through shared memory. cols is
/// the input's contiguous dim, rows the input dim that is the output's contiguous dim.
struct TiledParams {
  unsigned long long out;             ///< Output pointer.
  unsigned long long in;              ///< Input pointer.
  unsigned long long rows;            ///< R: extent of the dim that is contiguous in the output.
  unsigned long long cols;            ///< C: extent of the input's contiguous dim.
  unsigned long long in_row_stride;   ///< Input stride of R (units); C has input stride 1.
  unsigned long long out_col_stride;  ///< Output stride of C (units); R has output stride 1.
  unsigned long long tiles;           ///< batch * row_tiles * col_tiles.
  // Tile order inside one plane: bands of `group` tile rows, one band after the other; inside a band the tile
  // row varies fastest, so the blocks in flight cover a compact patch of both the input and the output.
  Divisor plane_tiles;            ///< row_tiles * col_tiles: tile t = b * plane_tiles + (tile in plane).
  Divisor band_tiles;             ///< group * col_tiles: the tiles of one full band.
  Divisor band_rows;              ///< group: tile rows of a full band.
  Divisor last_rows;              ///< Tile rows of the last, partial band (row_tiles % group, or group).
  unsigned long long full_bands;  ///< row_tiles / group.
  Divisor batch[kMaxRank - 2];    ///< Batch dims in input order, outermost first.
  unsigned long long in_batch_strides[kMaxRank - 2];   ///< Input stride (units) of each batch dim.
  unsigned long long out_batch_strides[kMaxRank - 2];  ///< Output stride (units) of each batch dim.
};

}  // namespace pmt
}  // namespace jitune
