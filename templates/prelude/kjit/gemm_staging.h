// Staging of GEMM operand tiles from global memory, shared by the GEMM templates that stage
// through shared memory (LDS): gemm_mma and gemm_mfma.
#pragma once

namespace kjit_gemm {

// One thread's share of a ROWS x COLS tile of a row-major matrix, held in registers between
// the read from global memory (of the next step) and the store to shared memory (after this
// step's compute), so that the read's latency overlaps the compute. The tile is cut into chunks
// of CHUNK consecutive elements of a row (16 bytes: 8 of the 16-bit types, 16 of fp8's bytes),
// one load where `vectors` says rows start 16-byte aligned and the chunk lies inside the matrix;
// element by element, zero outside, otherwise. Consecutive threads take consecutive chunks along
// a row: coalesced reads.
template <int ROWS, int COLS, int THREADS, typename T, int CHUNK = 8> struct TileShare {
  static_assert(COLS % CHUNK == 0, "whole chunks per tile row");
  static constexpr int CHUNKS = ROWS * COLS / CHUNK;
  static constexpr int ITEMS = (CHUNKS + THREADS - 1) / THREADS;
  kjit::Vec<T, CHUNK> chunks[ITEMS];

  // Chunk `item` of this thread: its row and first column in the tile; false past the tile.
  __device__ static bool place(int item, int &r, int &c) {
    const int i = item * THREADS + int(threadIdx.x);
    r = i / (COLS / CHUNK);
    c = i % (COLS / CHUNK) * CHUNK;
    return i < CHUNKS;
  }

  // Reads the tile at (row0, col0) of the `rows` x `cols` matrix `from`.
  __device__ void read(const T *from, int rows, int cols, int row0, int col0, bool vectors) {
#pragma unroll
    for (int item = 0; item < ITEMS; ++item) {
      int r, c;
      if (!place(item, r, c))
        continue;
      const int row = row0 + r, col = col0 + c;
      const T *at = from + static_cast<long long>(row) * cols + col;
      if (vectors && row < rows && col + CHUNK <= cols) {
        chunks[item] = kjit::load_vec<CHUNK>(at);
      } else {
#pragma unroll
        for (int j = 0; j < CHUNK; ++j)
          chunks[item].at[j] = row < rows && col + j < cols ? at[j] : kjit::from_float<T>(0.0f);
      }
    }
  }

  // Hands each chunk to store(r, c, chunk).
  template <typename Store> __device__ void write(Store store) const {
#pragma unroll
    for (int item = 0; item < ITEMS; ++item) {
      int r, c;
      if (place(item, r, c))
        store(r, c, chunks[item]);
    }
  }
};

__device__ inline bool aligned16(const void *pointer) {
  return (reinterpret_cast<unsigned long long>(pointer) & 15) == 0;
}

} // namespace kjit_gemm
