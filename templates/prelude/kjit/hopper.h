// Hopper (sm_90a) device helpers for templates that feed wgmma from the tensor memory accelerator:
// mbarriers, tensor-map copies, shared-memory descriptors with the 128-byte swizzle, m64nNk16
// wgmma with A from shared memory or from registers, and the persistent grid's tile order.
// gemm_wgmma.hip, moe_wgmma.hip and flash_attention.hip include it (as kjit/hopper.h).
#pragma once

#if KJIT_CUDA
namespace kjit {
struct alignas(64) TensorMap { // the driver's CUtensorMap, opaque
  unsigned long long opaque[16];
};
} // namespace kjit

namespace kjit::hopper {

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

// Clusters: a barrier of every thread of the cluster's blocks, this block's rank in it, an
// arrival on the barrier at `bar`'s offset in block `rank`'s shared memory (CTA-scope release,
// as barrier_arrive: it orders a consumer's wgmma reads, complete at wgmma.wait_group, before the
// peer's copy engine writes), and copy_box into the same offset of every block in `blocks` (a
// bit per rank), completing on the barrier at `bar`'s offset in each.
__device__ inline void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ inline unsigned cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
__device__ inline void barrier_arrive_in(unsigned long long *bar, unsigned rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" ::"r"(shared_address(bar)),
               "r"(rank)
               : "memory");
}
__device__ inline void multicast_box(void *to, const kjit::TensorMap *map, unsigned long long *bar,
                                     int column, int row, unsigned short blocks) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(shared_address(to)),
               "l"(reinterpret_cast<unsigned long long>(map)), "r"(shared_address(bar)),
               "r"(column), "r"(row), "h"(blocks)
               : "memory");
}

// A wgmma shared-memory descriptor with the 128-byte swizzle (layout type 1 in bits 62-63):
// start address, leading and stride byte offsets, each in 16-byte units. K-major tiles (rows of
// 64 elements, 128 bytes) use stride 1024 between groups of 8 rows; the leading offset is unused.
// An MN-major tile is column blocks of 64 elements, each rows of 128 bytes: leading offset from
// one column block to the next, stride 1024 between groups of 8 rows.
__device__ inline unsigned long long descriptor(const void *start, unsigned leading,
                                                unsigned stride) {
  return (unsigned long long)((shared_address(start) & 0x3FFFF) >> 4) |
         ((unsigned long long)((leading >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((stride >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int PENDING> __device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// clang-format off
// Generated by tools/generate/wgmma_wrappers.py.
#define KJIT_WGMMA_SS_N16(TYPE) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"  \
               "wgmma.mma_async.sync.aligned.m64n16k16.f32." TYPE "." TYPE  \
               " {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, %11;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_SS_N32(TYPE) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"  \
               "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE  \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, %19;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_SS_N64(TYPE) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"  \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE  \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, %35;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_SS_N128(TYPE) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"  \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE  \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, %67;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_SS_N256(TYPE) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"  \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE  \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, %131;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_RS_N64(TYPE) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"  \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE  \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_RS_N128(TYPE) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"  \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE  \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, %70;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(TRANS_B))
// End of generated code.
// clang-format on

// d += A B (accumulate != 0) or d = A B for one m64nNk16 step, T half or bfloat16: A [64, 16]
// K-major in shared memory (descriptor a), B [16, N] in shared memory (descriptor b), K-major
// with TRANS_B 0, MN-major with TRANS_B 1.
template <typename T, int N, int TRANS_B> struct WgmmaShared;
// The same with A in registers: a warp's 16 rows as mma.sync's m16n8k16 A fragment (pairs of
// T in four registers).
template <typename T, int N, int TRANS_B> struct WgmmaRegisters;

#define KJIT_HOPPER_WGMMA_SHARED(T, NAME, N)                                                       \
  template <int TRANS_B> struct WgmmaShared<T, N, TRANS_B> {                                       \
    __device__ static void run(float (&d)[N / 2], unsigned long long a, unsigned long long b,      \
                               int accumulate) {                                                   \
      KJIT_WGMMA_SS_N##N(NAME);                                                                    \
    }                                                                                              \
  };
#define KJIT_HOPPER_WGMMA_REGISTERS(T, NAME, N)                                                    \
  template <int TRANS_B> struct WgmmaRegisters<T, N, TRANS_B> {                                    \
    __device__ static void run(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long b,    \
                               int accumulate) {                                                   \
      KJIT_WGMMA_RS_N##N(NAME);                                                                    \
    }                                                                                              \
  };
KJIT_HOPPER_WGMMA_SHARED(half, "f16", 16)
KJIT_HOPPER_WGMMA_SHARED(half, "f16", 32)
KJIT_HOPPER_WGMMA_SHARED(half, "f16", 64)
KJIT_HOPPER_WGMMA_SHARED(half, "f16", 128)
KJIT_HOPPER_WGMMA_SHARED(half, "f16", 256)
KJIT_HOPPER_WGMMA_SHARED(bfloat16, "bf16", 16)
KJIT_HOPPER_WGMMA_SHARED(bfloat16, "bf16", 32)
KJIT_HOPPER_WGMMA_SHARED(bfloat16, "bf16", 64)
KJIT_HOPPER_WGMMA_SHARED(bfloat16, "bf16", 128)
KJIT_HOPPER_WGMMA_SHARED(bfloat16, "bf16", 256)
KJIT_HOPPER_WGMMA_REGISTERS(half, "f16", 64)
KJIT_HOPPER_WGMMA_REGISTERS(half, "f16", 128)
KJIT_HOPPER_WGMMA_REGISTERS(bfloat16, "bf16", 64)
KJIT_HOPPER_WGMMA_REGISTERS(bfloat16, "bf16", 128)
#undef KJIT_HOPPER_WGMMA_SHARED
#undef KJIT_HOPPER_WGMMA_REGISTERS

// Tile t of a persistent grid's grouped order: GROUP_M rows of tiles sweep the columns together,
// so the blocks resident at once share their rows of A and columns of B in L2.
template <int GROUP_M>
__device__ inline void place_tile(int t, int tiles_m, int tiles_n, int &tile_m, int &tile_n) {
  const int per_group = GROUP_M * tiles_n, first = t / per_group * GROUP_M;
  const int rows = min(tiles_m - first, GROUP_M);
  tile_m = first + t % per_group % rows;
  tile_n = t % per_group / rows;
}

// Stores through the copy engine: the box at `from` (written by the threads in the generic
// proxy, then made visible to the copy engine by fence_async_shared) to `map` at (column, row);
// the engine drops the parts of the box past the tensor's edges. Each thread's stores go in
// bulk groups: bulk_commit closes one, bulk_wait_read<N> waits until at most N of them still read
// shared memory (their buffers may then be rewritten), bulk_wait<0> until all have written.
__device__ inline void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ inline void store_box(const kjit::TensorMap *map, const void *from, int column,
                                 int row) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(shared_address(from)), "r"(column), "r"(row)
               : "memory");
}
__device__ inline void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int PENDING> __device__ inline void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(PENDING) : "memory");
}
template <int PENDING> __device__ inline void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(PENDING) : "memory");
}

// A barrier of `threads` threads (a multiple of 32) on hardware barrier `id` (1 to 15; 0 is
// __syncthreads'), e.g. one warpgroup's; bar.arrive counts this thread in without waiting.
__device__ inline void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ inline void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// A warpgroup's 64 rows x COLUMNS of 16-bit T, accumulated by m64nNk16 wgmma (register 4j + 2h + e
// is row 16 warp + lane / 4 + 8h, column 8j + 2 (lane % 4) + e), stored to `map` (boxes of 64 x
// 64, the 128-byte swizzle) at (column, row) through shared memory: box after box of 64 columns
// into the warpgroup's two 8 KiB `buffers` (1024-aligned; `buffer` the next to write), the copy
// engine storing each while the next is written. pair(4j + 2h, v0, v1) gives the two values of
// registers 4j + 2h and 4j + 2h + 1. A box's row r holds column 8j + 2 (lane % 4) in 16-byte chunk
// j ^ (r % 8), as the 128-byte swizzle lays it: the warp's 8 rows of a store fall on 8 distinct
// chunks, all 32 banks. Boxes starting at or past n are skipped; the engine drops rows past the
// map's. `barrier` is a named barrier of the warpgroup's 128 threads. Before the buffers are
// given up (the kernel's end), thread 0 waits for the stores (bulk_wait<0>).
template <typename T, int COLUMNS, typename Pair>
__device__ inline void store_boxes(const kjit::TensorMap *map, unsigned char *buffers, int &buffer,
                                   Pair pair, int row, int column, int n, int barrier, int thread) {
  const int warp = thread / 32, lane = thread % 32;
#pragma unroll
  for (int box = 0; box < COLUMNS / 64; ++box) {
    if (column + box * 64 >= n)
      break;
    unsigned char *to = buffers + buffer * 8192;
    if (thread == 0) // the store that read this buffer, two boxes ago, has read it
      bulk_wait_read<1>();
    named_barrier_sync(barrier, 128);
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v0, v1;
        pair(4 * (8 * box + j) + 2 * h, v0, v1);
        const int r = warp * 16 + lane / 4 + 8 * h;
        *reinterpret_cast<typename kjit::Pairs<T>::type *>(
            to + r * 128 + ((j ^ (r % 8)) * 16) + 4 * (lane % 4)) = kjit::Pairs<T>::pack(v0, v1);
      }
    fence_async_shared(); // this thread's writes, before the copy engine reads them
    named_barrier_sync(barrier, 128);
    if (thread == 0) {
      store_box(map, to, column + box * 64, row);
      bulk_commit();
    }
    buffer ^= 1;
  }
}

} // namespace kjit::hopper
#endif
