// index_add by partition [partition=1]: the sources are first sorted into buckets of destination elements,
// then each bucket is summed in shared memory and added to the destination once. Random atomics to the
// destination (each one a read-modify-write of a 32-byte sector in L2, and from DRAM once the destination
// outgrows L2) become shared-memory atomics, and the destination is read and written once, coalesced. It pays
// for that with a second read of the index and a write and read of the bucketed entries; it wins where
// sources are many and collisions few or moderate, which is where plain atomics are slowest.
//
// One cooperative launch (every block resident: LaunchShape::cooperative), four phases separated by two grid
// barriers:
//   1. count: every block takes one contiguous chunk of the sources and counts its entries per bucket in
//      shared memory, then adds its counts to the bucket totals.
//   2. reserve: every block scans the totals (the buckets' first entries) and reserves a range in each bucket
//      it has entries for (an atomic on the bucket's fill count).
//   3. scatter: every block reads its chunk again, a tile at a time; it sorts the tile's entries (offset
//      inside the bucket and source value, PartitionEntry) by bucket in shared memory and writes each bucket's
//      run of them contiguously into its range.
//   4. sum: the buckets' entries, cut into segments of at most `segment` entries, are taken by the blocks one
//      at a time (an atomic ticket: a skewed index costs balance, not a serial tail). A block sums its
//      segment in float bins in shared memory, then adds each touched bin into the destination: a plain
//      read-add-write when the bucket is one segment (no other block touches it), else an atomic.
// The last block to finish zeroes the workspace header again (LaunchPrep::rezeroed_by_kernel). Indices
// outside [0, rows) are skipped like the atomic kernels do. The sum's order varies between runs, as with
// atomics; each destination element is rounded once per segment.
#pragma once

#include "common/grid_barrier.cuh"

namespace jitune {
namespace sa {

/// Words at the start of the partition workspace, before the totals / fill / base arrays of `buckets` each
/// (mirrors the host's partition layout in scatter_add.cpp).
constexpr int kPartitionHeaderWords = 4;

/// Exclusive prefix sum of one value per thread over the block; `total` receives the block's sum. Every
/// thread calls it.
template <int kBlock>
__device__ __forceinline__ unsigned block_exclusive_scan(unsigned v, unsigned& total) {
  __shared__ unsigned warp_totals[kBlock / 32];
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x / 32u;
  unsigned inclusive = v;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const unsigned o = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= static_cast<unsigned>(offset)) inclusive += o;
  }
  __syncthreads();  // warp_totals may still be read by an earlier call
  if (lane == 31u) warp_totals[warp] = inclusive;
  __syncthreads();
  unsigned before = 0, sum = 0;
#pragma unroll
  for (int w = 0; w < kBlock / 32; ++w) {
    const unsigned t = warp_totals[w];
    if (static_cast<unsigned>(w) < warp) before += t;
    sum += t;
  }
  total = sum;
  return before + inclusive - v;
}

/// One bucketed entry: the element's offset inside its bucket and the source value's bits. 16-bit types pack
/// both in one word (offset high, value low); float takes a pair.
template <class T>
struct PartitionEntry {
  using type = unsigned;
  static __device__ __forceinline__ unsigned pack(unsigned offset, T v) {
    return (offset << 16) | static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&v));
  }
  static __device__ __forceinline__ unsigned offset(unsigned e) { return e >> 16; }
  static __device__ __forceinline__ float value(unsigned e) {
    const unsigned short bits = static_cast<unsigned short>(e & 0xffffu);
    return to_float(*reinterpret_cast<const T*>(&bits));
  }
};
template <>
struct PartitionEntry<float> {
  using type = uint2;
  static __device__ __forceinline__ uint2 pack(unsigned offset, float v) { return make_uint2(offset, __float_as_uint(v)); }
  static __device__ __forceinline__ unsigned offset(uint2 e) { return e.x; }
  static __device__ __forceinline__ float value(uint2 e) { return __uint_as_float(e.y); }
};

/// Exclusive prefix sum of a[0, n) in shared memory, in place; returns the sum. Every thread calls it; ends
/// synchronised.
template <int kBlock>
__device__ __forceinline__ unsigned scan_in_place(unsigned* a, int n) {
  unsigned running = 0;
  for (int first = 0; first < n; first += kBlock) {
    const int i = first + static_cast<int>(threadIdx.x);
    const unsigned v = i < n ? a[i] : 0u;
    unsigned sum;
    const unsigned before = block_exclusive_scan<kBlock>(v, sum);
    if (i < n) a[i] = running + before;
    running += sum;
  }
  __syncthreads();
  return running;
}

// Tunables (host names in brackets):
//   kBlock      [block]:   threads per block; 256, 512 or 1024.
//   kItems      [items]:   units each thread takes per tile (a tile: kBlock * kItems units) in phases 1 and 3.
//   kBucketLog  [bucket]:  log2 of the destination elements per bucket (its float bins in shared memory).
//   kSegmentLog [segment]: log2 of the most entries a block sums before it adds its bins to the destination.
// Arguments: dst (rows x row_length), index (count entries), src (count x row_length), workspace (the header
// words, then totals, fill and base of `buckets` words each, then one PartitionEntry per source element at
// the next 8-byte boundary; the header, totals and fill zero at launch), rows, count, row_length, buckets,
// parity (dst's element offset modulo 2), alpha (src multiplier). Dynamic shared memory (partition_shared_bytes
// on the host): a word per bucket, then the larger of phase 3's tile (a word per bucket, an entry and a 16-bit
// bucket per unit) and phase 4's float bins.
template <class T, class I, int kBlock, int kItems, int kBucketLog, int kSegmentLog>
__global__ void __launch_bounds__(kBlock, 1)
    index_add_partition(T* dst, const I* index, const T* src, unsigned* workspace, long long rows,
                        long long count, long long row_length, int buckets, int parity, float alpha) {
  using Entry = typename PartitionEntry<T>::type;
  constexpr int kBins = 1 << kBucketLog;
  constexpr int kTile = kBlock * kItems;
  constexpr unsigned segment = 1u << kSegmentLog;
  unsigned* barrier = workspace;
  unsigned* done = workspace + 1;
  unsigned* ticket = workspace + 2;
  unsigned* totals = workspace + kPartitionHeaderWords;
  unsigned* fill = totals + buckets;
  unsigned* base = fill + buckets;
  const long long units = count * row_length;
  Entry* entries = reinterpret_cast<Entry*>(
      reinterpret_cast<char*>(workspace) + ((4ll * (kPartitionHeaderWords + 3ll * buckets) + 7) & ~7ll));
  const long long numel = rows * row_length;

  extern __shared__ unsigned shared_words[];
  unsigned* slots = shared_words;          // phases 1-3: per bucket; phase 4: segment ends
  unsigned* start = slots + buckets;       // phase 3: the tile's count, then first position, per bucket
  Entry* stage = reinterpret_cast<Entry*>(start + buckets);  // phase 3: the tile's entries by bucket
  unsigned short* stage_bucket = reinterpret_cast<unsigned short*>(stage + kTile);
  float* bins = reinterpret_cast<float*>(slots + buckets);  // phase 4

  // This block's chunk of units, in tiles.
  const long long per_block = (units + gridDim.x - 1) / gridDim.x;
  const long long u0 = static_cast<long long>(blockIdx.x) * per_block;
  const long long u1 = u0 + per_block < units ? u0 + per_block : (u0 < units ? units : u0);


  // 1. count
  for (int b = threadIdx.x; b < buckets; b += kBlock) slots[b] = 0u;
  __syncthreads();
  // Batches of twice a tile, the next batch's index loaded raw while this one's counts are added (a bounds
  // check right after the load would wait for it at once).
  constexpr int kBatch = 2 * kItems;
  I batch_raw[kBatch];
  auto load_raw = [&](long long step) {
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const long long u = step + static_cast<long long>(k) * kBlock + threadIdx.x;
      if (u < u1) batch_raw[k] = index[row_length == 1 ? u : u / row_length];
    }
  };
  if (u0 < u1) load_raw(u0);
  for (long long step = u0; step < u1; step += static_cast<long long>(kBatch) * kBlock) {
    I raw[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) raw[k] = batch_raw[k];
    if (step + static_cast<long long>(kBatch) * kBlock < u1) load_raw(step + static_cast<long long>(kBatch) * kBlock);
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const long long u = step + static_cast<long long>(k) * kBlock + threadIdx.x;
      const long long r = u < u1 ? static_cast<long long>(raw[k]) : -1;
      if (r < 0 || r >= rows) continue;
      const long long row = row_length == 1 ? u : u / row_length;
      atomicAdd(slots + ((r * row_length + (u - row * row_length)) >> kBucketLog), 1u);
    }
  }
  __syncthreads();
  for (int b = threadIdx.x; b < buckets; b += kBlock)
    if (slots[b]) atomicAdd(totals + b, slots[b]);

  grid_barrier(barrier, 1);


  // 2. reserve: slots[b] becomes the position of this block's next entry in bucket b.
  unsigned running = 0;
  for (int first = 0; first < buckets; first += kBlock) {
    const int b = first + static_cast<int>(threadIdx.x);
    const unsigned t = b < buckets ? __ldcg(totals + b) : 0u;
    unsigned sum;
    const unsigned at = running + block_exclusive_scan<kBlock>(t, sum);
    running += sum;
    if (b < buckets) {
      if (blockIdx.x == 0) base[b] = at;
      if (slots[b]) slots[b] = at + atomicAdd(fill + b, slots[b]);
    }
  }

  // 3. scatter, one tile at a time: the tile's entries are sorted by bucket in shared memory first, so each
  // bucket's entries leave as one contiguous run rather than as scattered words. Last tile first: the end of
  // the chunk's index may still be in L2 from phase 1.
  const long long tiles = (u1 - u0 + kTile - 1) / kTile;
  // The next tile's index and source are loaded while this one is sorted and written: raw, so that nothing
  // waits for them before the next iteration (a bounds check here would stall on the index at once).
  I next_raw[kItems];
  T next_value[kItems];
  auto load_tile = [&](long long s) {
    const long long step = u0 + s * kTile;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const long long u = step + static_cast<long long>(k) * kBlock + threadIdx.x;
      if (u < u1) {
        next_raw[k] = index[row_length == 1 ? u : u / row_length];
        next_value[k] = src[u];
      }
    }
  };
  if (tiles > 0) load_tile(tiles - 1);
  for (long long s = tiles - 1; s >= 0; --s) {
    int target[kItems];
    T value[kItems];
    unsigned rank[kItems];
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const long long u = u0 + s * kTile + static_cast<long long>(k) * kBlock + threadIdx.x;
      const long long row = row_length == 1 ? u : u / row_length;
      const long long r = u < u1 ? static_cast<long long>(next_raw[k]) : -1;
      target[k] = r < 0 || r >= rows ? -1 : static_cast<int>(r * row_length + (u - row * row_length));
      value[k] = next_value[k];
    }
    if (s > 0) load_tile(s - 1);
    __syncthreads();  // the previous tile's runs are out and its counts folded into slots
    for (int b = threadIdx.x; b < buckets; b += kBlock) start[b] = 0u;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      rank[k] = target[k] >= 0 ? atomicAdd(start + (target[k] >> kBucketLog), 1u) : 0u;
    __syncthreads();
    const int in_tile = static_cast<int>(scan_in_place<kBlock>(start, buckets));
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (target[k] < 0) continue;
      const int b = static_cast<int>(target[k] >> kBucketLog);
      const unsigned j = start[b] + rank[k];
      stage[j] = PartitionEntry<T>::pack(static_cast<unsigned>(target[k] & (kBins - 1)), value[k]);
      stage_bucket[j] = static_cast<unsigned short>(b);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < in_tile; j += kBlock) {
      const int b = stage_bucket[j];
      entries[slots[b] + (static_cast<unsigned>(j) - start[b])] = stage[j];
    }
    __syncthreads();
    for (int b = threadIdx.x; b < buckets; b += kBlock)
      slots[b] += (b + 1 < buckets ? start[b + 1] : static_cast<unsigned>(in_tile)) - start[b];
  }
  grid_barrier(barrier, 2);

  // 4. sum. slots[b] becomes the end (exclusive) of bucket b's segments in the ticket order.
  running = 0;
  for (int first = 0; first < buckets; first += kBlock) {
    const int b = first + static_cast<int>(threadIdx.x);
    const unsigned t = b < buckets ? __ldcg(totals + b) : 0u;
    const unsigned n = (t + segment - 1u) >> kSegmentLog;
    unsigned sum;
    const unsigned before = running + block_exclusive_scan<kBlock>(n, sum);
    running += sum;
    if (b < buckets) slots[b] = before + n;
  }
  const unsigned work = running;  // segments in all
  __shared__ unsigned taken;
  constexpr int kFlush = sizeof(T) == 4 ? kPlainAtomic : kPackedAtomic;
  for (;;) {
    __syncthreads();  // slots written; the previous segment's bins flushed
    if (threadIdx.x == 0) taken = atomicAdd(ticket, 1u);
    __syncthreads();
    const unsigned w = taken;
    if (w >= work) break;
    // The bucket holding segment w: the first b with slots[b] > w.
    int lo = 0, hi = buckets - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (slots[mid] > w) hi = mid; else lo = mid + 1;
    }
    const int b = lo;
    const unsigned first_segment = b > 0 ? slots[b - 1] : 0u;
    const unsigned total = __ldcg(totals + b);
    const bool alone = slots[b] - first_segment == 1u;
    const long long e0 = static_cast<long long>(__ldcg(base + b)) +
                         static_cast<long long>(w - first_segment) * segment;
    const long long e1 = e0 + segment < static_cast<long long>(__ldcg(base + b)) + total
                             ? e0 + segment
                             : static_cast<long long>(__ldcg(base + b)) + total;
    const long long s0 = static_cast<long long>(b) << kBucketLog;
    const long long s1 = s0 + kBins < numel ? s0 + kBins : numel;
    for (int i = threadIdx.x; i < kBins; i += kBlock) bins[i] = neg_zero();
    __syncthreads();
    // The next batch of entries is loaded before this batch's shared-memory atomics (compare-and-swap loops
    // for float) are issued, so the two overlap. Written by other blocks in phase 3: read from L2.
    Entry next[kItems];
    auto load_batch = [&](long long e) {
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const long long i = e + static_cast<long long>(k) * kBlock;
        if (i < e1) next[k] = __ldcg(entries + i);
      }
    };
    load_batch(e0 + threadIdx.x);
    for (long long e = e0 + threadIdx.x; e < e1; e += kTile) {
      Entry entry[kItems];
#pragma unroll
      for (int k = 0; k < kItems; ++k) entry[k] = next[k];
      if (e + kTile < e1) load_batch(e + kTile);
#pragma unroll
      for (int k = 0; k < kItems; ++k)
        if (e + static_cast<long long>(k) * kBlock < e1)
          atomicAdd(bins + PartitionEntry<T>::offset(entry[k]), PartitionEntry<T>::value(entry[k]) * alpha);
    }
    __syncthreads();
    if (alone) {
      // Eight elements per thread in flight: a loop of one load each would wait out the latency per element.
      constexpr int kBatch = 8;
      for (int first = threadIdx.x; first < s1 - s0; first += kBlock * kBatch) {
        float v[kBatch], old[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          const int i = first + k * kBlock;
          v[k] = i < s1 - s0 ? bins[i] : neg_zero();
          old[k] = is_neg_zero(v[k]) ? 0.f : to_float(dst[s0 + i]);
        }
#pragma unroll
        for (int k = 0; k < kBatch; ++k)
          if (!is_neg_zero(v[k])) dst[s0 + first + k * kBlock] = from_float<T>(old[k] + v[k]);
      }
    } else {
      flush_bins<T, kFlush, kBlock>(dst, bins, s0, s1, numel, parity);
    }
  }

  // The last block out zeroes the header for the next launch: every block has finished reading it.
  __shared__ bool last;
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(done, 1u) == gridDim.x - 1u;
  }
  __syncthreads();
  if (!last) return;
  for (long long i = threadIdx.x; i < kPartitionHeaderWords + 2ll * buckets; i += kBlock) workspace[i] = 0u;
}

}  // namespace sa
}  // namespace jitune
