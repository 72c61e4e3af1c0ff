// Hopper (sm_90a) building blocks for kernels fed by the tensor memory accelerator and computing
// with wgmma: mbarriers, tile copies through tensor maps, shared-memory matrix descriptors with
// the 128-byte swizzle, the wgmma fence/commit/wait, and the grouped tile order of a persistent
// grid. gemm_fp8.hip includes it.
#pragma once

namespace kjit {
struct alignas(64) TensorMap { // the driver's CUtensorMap, opaque
  unsigned long long opaque[16];
};
} // namespace kjit

namespace kjit_hopper {

__device__ inline unsigned shared_address(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// mbarriers: init, arrive, arrive announcing the bytes the copy engine will deliver, and a wait
// for the phase of the given parity to complete.
__device__ inline void barrier_init(unsigned long long *bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals));
}
__device__ inline void barrier_arrive(unsigned long long *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)));
}
__device__ inline void barrier_expect_bytes(unsigned long long *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)),
               "r"(bytes));
}
__device__ inline void barrier_wait(unsigned long long *bar, unsigned parity) {
  asm volatile("{\n.reg .pred done;\nWAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=;\n}\n" ::"r"(shared_address(bar)),
               "r"(parity));
}

// The box of `map` at (column, row) into `to`, completing on `bar`.
__device__ inline void copy_box(void *to, const kjit::TensorMap *map, unsigned long long *bar,
                                int column, int row) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4}], [%2];" ::"r"(shared_address(to)),
               "l"(reinterpret_cast<unsigned long long>(map)), "r"(shared_address(bar)),
               "r"(column), "r"(row)
               : "memory");
}

// A wgmma shared-memory descriptor with the 128-byte swizzle (layout type 1 in bits 62-63) for
// a K-major tile of 128-byte rows: start address and the 1024-byte stride between groups of 8
// rows, in 16-byte units (the leading offset is unused for this layout).
__device__ inline unsigned long long kmajor_descriptor(const void *start) {
  return (unsigned long long)((shared_address(start) & 0x3FFFF) >> 4) | (1ull << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int PENDING> __device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// Tile t of the grouped order: GROUP_M rows of tiles sweep the columns together, so that a
// group's columns of B stay in L2.
template <int GROUP_M>
__device__ inline void place_tile(int t, int tiles_m, int tiles_n, int &tile_m, int &tile_n) {
  const int per_group = GROUP_M * tiles_n, first = t / per_group * GROUP_M;
  const int rows = min(tiles_m - first, GROUP_M);
  tile_m = first + t % per_group % rows;
  tile_n = t % per_group / rows;
}

} // namespace kjit_hopper
