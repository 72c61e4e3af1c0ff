// C = A @ B on Hopper tensor cores (sm_90a: wgmma, TMA, setmaxnreg), for half and bfloat16: A
// [M, K] row-major; B either [K, N] row-major (B_KMAJOR = 0, the contract of gemm.hip, read by
// wgmma as a transposed operand) or an nn.Linear weight W [N, K] row-major (B_KMAJOR = 1, C =
// A @ W^T); C [M, N] row-major, float accumulation, one rounding to T.
//
// A and B arrive as tensor maps (kjit::encode_tensor_map) with the 128-byte swizzle: boxes of
// 128 x 64 of A, and of BLOCK_N x 64 (W) or 64 x 64 (B, BLOCK_N / 64 boxes side by side) of B.
// The maps' bounds make ragged M, N and K work: reads past an edge fill zeros, so partial tiles
// add nothing; stores are checked against m and n (EPILOGUE 0) or dropped past the edges by the
// copy engine (EPILOGUE 1).
//
// Three warpgroups. Warpgroup 0 gives up registers (setmaxnreg) and one of its threads issues
// the copies into a ring of STAGES stages, each guarded by a "full" mbarrier (the copy engine
// counts its bytes in) and an "empty" one (each consumer arrives when its wgmma no longer reads
// the stage). Warpgroups 1 and 2 take 64 rows each of a 128 x BLOCK_N tile and keep it in
// registers, one wgmma m64nBLOCK_Nk16 per 16 of K, one batch of BK / 16 in flight while the
// previous stage is released. The grid is persistent: block b takes tiles b, b + gridDim.x, ...
// in a grouped order (GROUP_M rows of tiles sweep the columns together, so a group's B stays in
// L2), and the consumers' stores of one tile overlap the producer's loads of the next.
//
// CLUSTER_M = 2 (or CLUSTER_N = 2) runs the grid in clusters of two blocks that take vertically
// (horizontally) adjacent tiles, which share B's (A's) tile of every K step: each block copies
// half of it, multicast into both blocks' shared memory, and half the bytes leave L2. A stage is
// then written by both producers, so it is free only when both blocks' consumers are done with
// it: each consumer arrives on the "empty" barrier of every block of the cluster. The blocks
// wait for each other after making their barriers (a copy may not land before the peer's
// barrier exists) and before exiting (nor after the peer has gone).
//
// EPILOGUE 1 stores C through shared memory: each consumer writes 64 x 64 boxes of its rows,
// in the 128-byte swizzle (no bank conflicts), into one of two buffers, and the copy engine
// stores the box while the next is written. EPILOGUE 0 stores pairs from registers.
//
// SPLIT_K > 1 (with clusters of one tile: CLUSTER_M = CLUSTER_N = 1, EPILOGUE 0, BLOCK_N 128
// or less) is for few rows of A, where the tiles are fewer than the multiprocessors and the kernel is bound
// by reading B: the grid runs in clusters of SPLIT_K blocks that take the same tile, block r the
// K steps r, r + SPLIT_K, ... Each consumer then writes its float sums into a reduction buffer
// of its block's shared memory and announces them on every block's "ready" mbarrier; block r
// adds up the r-th of SPLIT_K shares of the tile's sums over the cluster's buffers in rank order
// (the same result on every run), stores them, and tells every block on its "done" mbarrier that
// it has read their buffers, which the next tile may then overwrite.
//
// SWAP_AB = 1 (K-major B, EPILOGUE 0) computes C's transpose: the launch passes W [N, K] as A and
// the activations [M, K] as the K-major B, with m and n exchanged, and each sum is stored to its
// transposed place. For linear() at few rows: W's rows fill wgmma's 64-row side, and the rows of
// A are its N side, as narrow as BLOCK_N 16, so a stage holds little besides W.
//
// BLOCK_M 64 (SWAP_AB) makes tiles of 64 rows of A, one consumer's: the second consumer
// warpgroup idles. Twice the tiles of 128 rows, for a product whose tiles of 128 rows leave most
// multiprocessors idle (linear() on a weight of 4096 rows: 32 tiles). With CLUSTER_N 2 the pair
// shares A's 64-row tile, each block copying 32 rows of it (the launch's boxes of A are then 32
// rows): the two tiles of the activations read each tile of W from L2 once.
#if KJIT_HIP
#error "kjit gemm_wgmma: wgmma and TMA are NVIDIA Hopper's (sm_90a); on AMD targets use gemm"
#else

namespace kjit {
struct alignas(64) TensorMap { // the driver's CUtensorMap, opaque
  unsigned long long opaque[16];
};
} // namespace kjit

namespace kjit_gemm_wgmma {

constexpr int BK = 64; // one 128-byte swizzle row of 16-bit elements

__device__ inline unsigned shared_address(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// mbarriers: init, arrive, arrive announcing the bytes the copy engine will deliver, and a wait
// for the phase of the given parity to complete.
__device__ inline void barrier_init(unsigned long long *bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)),
               "r"(arrivals));
}
__device__ inline void barrier_arrive(unsigned long long *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)));
}
__device__ inline void barrier_expect_bytes(unsigned long long *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   shared_address(bar)),
               "r"(bytes));
}
__device__ inline void barrier_wait(unsigned long long *bar, unsigned parity) {
  asm volatile("{\n.reg .pred done;\nWAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=;\n}\n" ::"r"(shared_address(bar)),
               "r"(parity));
}

// Cluster barriers (all threads of every block of the cluster) and this block's rank in it.
__device__ inline void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ inline unsigned cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// An arrival on the barrier at `bar`'s offset in the shared memory of the cluster's block `rank`.
// With the default (CTA-scope) release, as for the local barriers: what it orders is the
// consumer's wgmma reads, complete by wgmma.wait_group, before the peer's copy engine writes; a
// cluster-scope release fence here would stall the consumer's warpgroup on every stage.
__device__ inline void barrier_arrive_in(unsigned long long *bar, unsigned rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" ::"r"(
                   shared_address(bar)),
               "r"(rank)
               : "memory");
}

// As barrier_arrive_in, but releasing at cluster scope this thread's earlier writes (and those
// its warpgroup's barrier ordered before them) to the peer that waits with barrier_wait_cluster.
__device__ inline void barrier_arrive_released_in(unsigned long long *bar, unsigned rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "fence.acq_rel.cluster;\n"
               "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}" ::"r"(
                   shared_address(bar)),
               "r"(rank)
               : "memory");
}
// barrier_wait, acquiring at cluster scope what the arrivals released.
__device__ inline void barrier_wait_cluster(unsigned long long *bar, unsigned parity) {
  asm volatile("{\n.reg .pred done;\nWAIT_%=:\n"
               "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=;\n}\n" ::"r"(shared_address(bar)),
               "r"(parity)
               : "memory");
}
// 16 bytes at `p`'s offset in the shared memory of the cluster's block `rank`.
__device__ inline float4 load_from_block(const float4 *p, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(shared_address(p)), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
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

// copy_box into the same offset of every block of the cluster in `blocks` (a bit per rank),
// completing on the barrier at `bar`'s offset in each.
__device__ inline void multicast_box(void *to, const kjit::TensorMap *map, unsigned long long *bar,
                                     int column, int row, unsigned short blocks) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(shared_address(to)),
               "l"(reinterpret_cast<unsigned long long>(map)), "r"(shared_address(bar)),
               "r"(column), "r"(row), "h"(blocks)
               : "memory");
}

// The box of shared memory at `from` to `map` at (column, row), in this thread's bulk group;
// the copy engine drops what lies past the matrix's edges.
__device__ inline void store_box(const kjit::TensorMap *map, const void *from, int column, int row) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(shared_address(from)), "r"(column), "r"(row)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Until at most PENDING of this thread's bulk groups still read their shared memory.
template <int PENDING> __device__ inline void stores_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(PENDING) : "memory");
}
// The 128 threads of warpgroup `id` (named barrier 1 + id; 0 is __syncthreads').
__device__ inline void warpgroup_sync(int id) {
  asm volatile("bar.sync %0, 128;" ::"r"(1 + id) : "memory");
}

// A wgmma shared-memory descriptor with the 128-byte swizzle (layout type 1 in bits 62-63):
// start address, leading and stride byte offsets, each in 16-byte units. K-major tiles (rows of
// 64 elements, 128 bytes) use stride 1024 between groups of 8 rows; the leading offset is unused.
// An MN-major B tile is BLOCK_N / 64 column blocks of BK rows of 128 bytes: leading offset from
// one column block to the next, stride 1024 between groups of 8 rows of K.
__device__ inline unsigned long long descriptor(const void *start, unsigned leading,
                                                unsigned stride) {
  return (unsigned long long)((shared_address(start) & 0x3FFFF) >> 4) |
         ((unsigned long long)((leading >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((stride >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// Generated by tools/generate/wgmma_wrappers.py --gemm.
#define KJIT_WGMMA_N16(TYPE)                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\nwgmma.mma_async.sync.aligned.m64n16k16.f32." TYPE \
               "." TYPE " {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, %11;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_N32(TYPE)                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\nwgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE \
               "." TYPE " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, %19;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_N64(TYPE)                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE \
               "." TYPE " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, %35;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_N128(TYPE)                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE \
               "." TYPE " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, %67;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
#define KJIT_WGMMA_N256(TYPE)                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\nwgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE \
               "." TYPE " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, %131;\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))
// End of generated code.

// d += A B (accumulate != 0) or d = A B, for one m64nNk16 step of warpgroup-wide wgmma.
template <typename T, int N, int TRANS_B> struct Wgmma;
#define KJIT_WGMMA_SPECIALISE(N)                                                                   \
  template <int TRANS_B> struct Wgmma<half, N, TRANS_B> {                                          \
    __device__ static void run(float (&d)[N / 2], unsigned long long a, unsigned long long b,      \
                               int accumulate) {                                                   \
      KJIT_WGMMA_N##N("f16");                                                                      \
    }                                                                                              \
  };                                                                                               \
  template <int TRANS_B> struct Wgmma<bfloat16, N, TRANS_B> {                                      \
    __device__ static void run(float (&d)[N / 2], unsigned long long a, unsigned long long b,      \
                               int accumulate) {                                                   \
      KJIT_WGMMA_N##N("bf16");                                                                     \
    }                                                                                              \
  };
KJIT_WGMMA_SPECIALISE(16)
KJIT_WGMMA_SPECIALISE(32)
KJIT_WGMMA_SPECIALISE(64)
KJIT_WGMMA_SPECIALISE(128)
KJIT_WGMMA_SPECIALISE(256)
#undef KJIT_WGMMA_SPECIALISE

__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int PENDING> __device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// Tile t of the grouped order: GROUP_M rows of tiles sweep the columns together.
template <int GROUP_M>
__device__ inline void place_tile(int t, int tiles_m, int tiles_n, int &tile_m, int &tile_n) {
  const int per_group = GROUP_M * tiles_n, first = t / per_group * GROUP_M;
  const int rows = min(tiles_m - first, GROUP_M);
  tile_m = first + t % per_group % rows;
  tile_n = t % per_group / rows;
}

} // namespace kjit_gemm_wgmma

// One block per multiprocessor: the 384 threads' register cap at entry (65536 / 384) is what
// setmaxnreg redistributes, 40 to the producer and 232 to each consumer.
// SHAPE_M, SHAPE_N and SHAPE_K other than 0 make that size a compile-time constant (the launch
// passes the same value), so the tile counts, the K loop's trip count and the epilogue's bounds
// fold; 0 takes the argument. The launch gives A's map boxes of 64 rows (a tile's halves; 32,
// the halves of a 64-row tile, for BLOCK_M 64 in a pair along N) and a K-major B's of BLOCK_N /
// CLUSTER_M rows (the halves each block of a pair copies), and C's of 64 x 64.
template <typename T, int BLOCK_N, int STAGES, int B_KMAJOR, int GROUP_M, int CLUSTER_M,
          int CLUSTER_N, int EPILOGUE, int SPLIT_K, int SWAP_AB, int BLOCK_M, int SHAPE_M,
          int SHAPE_N, int SHAPE_K>
__global__ void __launch_bounds__(384, 1)
    gemm_wgmma(T *KJIT_RESTRICT c, const __grid_constant__ kjit::TensorMap map_c,
               const __grid_constant__ kjit::TensorMap map_a,
               const __grid_constant__ kjit::TensorMap map_b, int m_arg, int n_arg, int k_arg) {
  using namespace kjit_gemm_wgmma;
  // SHAPE_M and SHAPE_N are C's sizes: SWAP_AB's kernel m and n are C's n and m.
  constexpr int FIXED_M = SWAP_AB ? SHAPE_N : SHAPE_M, FIXED_N = SWAP_AB ? SHAPE_M : SHAPE_N;
  const int m = FIXED_M > 0 ? FIXED_M : m_arg, n = FIXED_N > 0 ? FIXED_N : n_arg,
            k = SHAPE_K > 0 ? SHAPE_K : k_arg;
  // Stores the sums of (row, column) and (row, column + 1) of the product. As they are, a pair
  // in C's row: n is even (the tensor map's rows are 16-byte multiples), so a pair starting
  // inside the matrix ends inside it, one 4-byte store. SWAP_AB: the product is C's transpose
  // (m rows of W, n of A), each sum its own element of C [n, m], and n may be odd.
  const auto store_pair = [&](int row, int column, float first, float second) {
    if (row >= m || column >= n)
      return;
    if (SWAP_AB) {
      c[static_cast<long long>(column) * m + row] = kjit::from_float<T>(first);
      if (column + 1 < n)
        c[static_cast<long long>(column + 1) * m + row] = kjit::from_float<T>(second);
    } else {
      *reinterpret_cast<typename kjit::Pairs<T>::type *>(c + static_cast<long long>(row) * n +
                                                          column) =
          kjit::Pairs<T>::pack(first, second);
    }
  };
  static_assert(BLOCK_N == 16 || BLOCK_N == 32 || BLOCK_N == 64 || BLOCK_N == 128 ||
                    BLOCK_N == 256,
                "wgmma N of 16, 32, 64, 128 or 256");
  static_assert(BLOCK_N >= 64 || (B_KMAJOR && EPILOGUE == 0),
                "BLOCK_N below 64 takes a K-major B and EPILOGUE 0 (64-column boxes)");
  static_assert(!SWAP_AB || (B_KMAJOR && EPILOGUE == 0),
                "SWAP_AB takes a K-major B and EPILOGUE 0 (C's transposed stores)");
  constexpr int CLUSTER = CLUSTER_M * CLUSTER_N;
  static_assert(BLOCK_M == 128 || (BLOCK_M == 64 && SWAP_AB),
                "BLOCK_M of 128, or 64 with SWAP_AB");
  constexpr int BM = BLOCK_M, CONSUMERS = BM / 64; // a consumer warpgroup per 64 rows of A
  static_assert(CLUSTER_M >= 1 && CLUSTER_N >= 1 && CLUSTER <= 2, "clusters of 1 or 2 blocks");
  static_assert(SPLIT_K == 1 || (CLUSTER == 1 && EPILOGUE == 0 && BLOCK_N <= 128),
                "SPLIT_K > 1 takes clusters of one tile, EPILOGUE 0 and BLOCK_N 128 or less");
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BLOCK_N * BK * 2, STAGE = A_BYTES + B_BYTES;
  constexpr int SUMS_BYTES = SPLIT_K > 1 ? BM * BLOCK_N * 4 : 0; // the reduction buffer
  constexpr unsigned COLUMN_BLOCK = 64 * BK * 2; // an MN-major B tile's 64 columns
  constexpr int C_BOX = 64 * 64 * 2;             // EPILOGUE 1: one box of a consumer's rows
  // Dynamic shared memory: STAGES stages, 1024-byte aligned (the swizzle's period), then for
  // EPILOGUE 1 two C boxes per consumer, then the barriers. The launch asks for the alignment's
  // slack (gemm.cpp).
  extern __shared__ unsigned char shared_raw[];
  unsigned char *stages = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<unsigned long long>(shared_raw) + 1023) & ~1023ull);
  unsigned char *c_boxes = stages + STAGES * STAGE;
  float4 *sums = reinterpret_cast<float4 *>(c_boxes + (EPILOGUE ? 4 * C_BOX : 0));
  unsigned long long *full =
      reinterpret_cast<unsigned long long *>(reinterpret_cast<unsigned char *>(sums) + SUMS_BYTES);
  unsigned long long *empty = full + STAGES;
  unsigned long long *ready = empty + STAGES, *done = ready + 1; // SPLIT_K > 1

  const int warpgroup = threadIdx.x / 128, thread = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], CONSUMERS * CLUSTER); // one arrival per consumer of the cluster
    }
    if (SPLIT_K > 1) {
      barrier_init(ready, CONSUMERS * SPLIT_K);
      barrier_init(done, CONSUMERS * SPLIT_K);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (CLUSTER * SPLIT_K > 1)
    cluster_sync();
  else
    __syncthreads();
  // gemm.cpp launches with LaunchConfig::overlap_previous: the making of the barriers above may
  // run while the stream's previous kernel finishes; the next kernel's blocks may start as soon as
  // all of this grid's have got here; every global access below (A, B, C) waits for the previous
  // kernel's results.
  kjit::let_dependents_start();
  kjit::wait_for_previous_grid();

  // A cluster takes pairs of tiles: super-tiles of CLUSTER_M x CLUSTER_N tiles in the grouped
  // order, its blocks one tile each. A pair's tile past the matrix is still computed (its peer
  // needs its half of the shared copies), on the zeros the copies fill, and not stored.
  const unsigned rank = CLUSTER * SPLIT_K > 1 ? cluster_rank() : 0;
  const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BLOCK_N - 1) / BLOCK_N;
  const int pairs_m = (tiles_m + CLUSTER_M - 1) / CLUSTER_M,
            pairs_n = (tiles_n + CLUSTER_N - 1) / CLUSTER_N;
  const int pairs = pairs_m * pairs_n;
  // This block's K steps: all of them, or every SPLIT_K-th from its rank (perhaps none). Taken
  // in turns rather than in ranges, the cluster's blocks read adjacent bytes of each row of B at
  // once: SPLIT_K times longer runs of each row in flight (a little faster, BENCHMARKS.md).
  const int k_blocks = (k + BK - 1) / BK, kb_begin = SPLIT_K > 1 ? static_cast<int>(rank) : 0;
  const int first_pair = blockIdx.x / (CLUSTER * SPLIT_K),
            pair_stride = gridDim.x / (CLUSTER * SPLIT_K);
  const auto place = [&](int t, int &tile_m, int &tile_n) {
    place_tile<GROUP_M>(t, pairs_m, pairs_n, tile_m, tile_n);
    tile_m = tile_m * CLUSTER_M + (CLUSTER_M > 1 ? rank : 0);
    tile_n = tile_n * CLUSTER_N + (CLUSTER_N > 1 ? rank : 0);
  };
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (thread == 0) {
      constexpr unsigned short BOTH = 3; // the cluster's blocks, for the multicasts
      int s = 0;
      unsigned phase = 0;
      for (int t = first_pair; t < pairs; t += pair_stride) {
        int tile_m, tile_n;
        place(t, tile_m, tile_n);
        for (int kb = kb_begin; kb < k_blocks; kb += SPLIT_K) {
          barrier_wait(&empty[s], phase ^ 1); // a fresh barrier's previous phase counts as done
          unsigned char *a_stage = stages + s * STAGE, *b_stage = a_stage + A_BYTES;
          if (CLUSTER_N > 1) { // the pair's rows of A are the same: half each, to both
            barrier_expect_bytes(&full[s], STAGE); // this block's copies and the peer's
            multicast_box(a_stage + rank * (A_BYTES / 2), &map_a, &full[s], kb * BK,
                          tile_m * BM + rank * (BM / 2), BOTH);
          } else {
            // A's tile in halves of 64 rows, the second only where it holds a row of A: the copy
            // engine fills rows past the matrix slowly (a few rows of A took 1.5 times as long
            // as 128), and the consumer of those rows stores nothing. BLOCK_M 64: one box.
            const bool second_half = CONSUMERS == 2 && tile_m * BM + BM / 2 < m;
            barrier_expect_bytes(&full[s],
                                 CONSUMERS == 1 || second_half ? STAGE : STAGE - A_BYTES / 2);
            copy_box(a_stage, &map_a, &full[s], kb * BK, tile_m * BM);
            if (second_half)
              copy_box(a_stage + A_BYTES / 2, &map_a, &full[s], kb * BK, tile_m * BM + BM / 2);
          }
          if (B_KMAJOR) {
            if (CLUSTER_M > 1) // the pair's columns of B are the same: half each, to both
              multicast_box(b_stage + rank * (B_BYTES / 2), &map_b, &full[s], kb * BK,
                            tile_n * BLOCK_N + rank * (BLOCK_N / 2), BOTH);
            else
              copy_box(b_stage, &map_b, &full[s], kb * BK, tile_n * BLOCK_N);
          } else {
            constexpr int BLOCKS = BLOCK_N / 64 / CLUSTER_M; // column blocks this block copies
#pragma unroll
            for (int i = 0; i < BLOCKS; ++i) {
              const int j = (CLUSTER_M > 1 ? rank * BLOCKS : 0) + i;
              if (CLUSTER_M > 1)
                multicast_box(b_stage + j * COLUMN_BLOCK, &map_b, &full[s],
                              tile_n * BLOCK_N + j * 64, kb * BK, BOTH);
              else
                copy_box(b_stage + j * COLUMN_BLOCK, &map_b, &full[s], tile_n * BLOCK_N + j * 64,
                         kb * BK);
            }
          }
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else if (warpgroup <= CONSUMERS) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int consumer = warpgroup - 1, rows = consumer * 64; // this consumer's rows of the tile
    const int warp = thread / 32, lane = thread % 32;
    // The stage's slot is free for this cluster's producers once this consumer is done with it.
    const auto release = [&](int stage) {
      if (thread != 0)
        return;
      if (CLUSTER > 1) {
        for (unsigned block = 0; block < CLUSTER; ++block)
          barrier_arrive_in(&empty[stage], block);
      } else {
        barrier_arrive(&empty[stage]);
      }
    };
    float acc[BLOCK_N / 2];
    int s = 0;
    unsigned phase = 0;
    int stored = 0; // EPILOGUE 1: boxes this consumer has stored; they alternate between buffers
    for (int t = first_pair; t < pairs; t += pair_stride) {
      int tile_m, tile_n;
      place(t, tile_m, tile_n);
      int previous = -1;
      if (kb_begin >= k_blocks) // a split with no K: its sums are zeros
#pragma unroll
        for (int i = 0; i < BLOCK_N / 2; ++i)
          acc[i] = 0;
      for (int kb = kb_begin; kb < k_blocks; kb += SPLIT_K) {
        barrier_wait(&full[s], phase);
        const unsigned char *a_stage = stages + s * STAGE + rows * 128;
        const unsigned char *b_stage = stages + s * STAGE + A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          const unsigned long long a = descriptor(a_stage + kk * 32, 16, 1024);
          const unsigned long long b = B_KMAJOR
                                           ? descriptor(b_stage + kk * 32, 16, 1024)
                                           : descriptor(b_stage + kk * 16 * 128, COLUMN_BLOCK, 1024);
          Wgmma<T, BLOCK_N, B_KMAJOR ? 0 : 1>::run(acc, a, b, kb > kb_begin || kk > 0);
        }
        wgmma_commit();
        wgmma_wait<1>(); // the previous stage's batch is done: release it
        if (previous >= 0)
          release(previous);
        previous = s;
        if (++s == STAGES) {
          s = 0;
          phase ^= 1;
        }
      }
      wgmma_wait<0>();
      if (previous >= 0)
        release(previous);
      // Register 4j + 2h + e of m64nNk16's accumulators holds row 16 * warp + lane / 4 + 8h,
      // column 8j + 2 (lane % 4) + e.
      const int first_row = tile_m * BM + rows;
      if (SPLIT_K > 1) {
        // Float4 q of a thread's sums (j = q) at sums[(consumer * Q + q) * 128 + thread]: the
        // same place in every block of the cluster, a warp's 16-byte stores side by side.
        constexpr int Q = BLOCK_N / 8;
        const int tiles_done = (t - first_pair) / pair_stride;
        if (tiles_done > 0 && thread == 0) // the peers have read the previous tile's sums
          barrier_wait_cluster(done, (tiles_done - 1) & 1);
        warpgroup_sync(consumer);
#pragma unroll
        for (int q = 0; q < Q; ++q)
          sums[(consumer * Q + q) * 128 + thread] =
              make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
        warpgroup_sync(consumer);
        if (thread == 0)
          for (unsigned block = 0; block < SPLIT_K; ++block)
            barrier_arrive_released_in(ready, block);
        barrier_wait_cluster(ready, tiles_done & 1);
        // This block's share: of this consumer's float4s (warp, q), those whose index
        // warp * Q + q is rank modulo SPLIT_K (the same for a whole warp; Q may be below SPLIT_K).
        const int row0 = first_row + warp * 16 + lane / 4;
#pragma unroll
        for (int q = 0; q < Q; ++q) {
          if ((warp * Q + q) % SPLIT_K != static_cast<int>(rank))
            continue;
          float4 total = make_float4(0, 0, 0, 0);
#pragma unroll
          for (unsigned block = 0; block < SPLIT_K; ++block) {
            const float4 part = load_from_block(sums + (consumer * Q + q) * 128 + thread, block);
            total.x += part.x;
            total.y += part.y;
            total.z += part.z;
            total.w += part.w;
          }
          const int column = tile_n * BLOCK_N + 8 * q + 2 * (lane % 4);
          store_pair(row0, column, total.x, total.y);
          store_pair(row0 + 8, column, total.z, total.w);
        }
        warpgroup_sync(consumer); // every thread has read the peers' sums
        if (thread == 0)
          for (unsigned block = 0; block < SPLIT_K; ++block)
            barrier_arrive_released_in(done, block);
      } else if (EPILOGUE) {
        // Box b holds columns 64b..64b+63: j from 8b; row r's 16-byte chunk q lies at chunk
        // q ^ (r % 8) of its 128 bytes, as the copy engine's 128-byte swizzle reads it.
#pragma unroll
        for (int box = 0; box < BLOCK_N / 64; ++box) {
          const int first_column = tile_n * BLOCK_N + box * 64;
          if (first_row >= m || first_column >= n) // the same for the whole warpgroup
            continue;
          // By the count of boxes stored, not the box's index: boxes past the edge are skipped,
          // and the buffer's last store must be the one before the latest.
          unsigned char *buffer = c_boxes + (consumer * 2 + stored++ % 2) * C_BOX;
          if (thread == 0)
            stores_read<1>(); // the store that last read this buffer (two boxes ago) is done
          warpgroup_sync(consumer);
#pragma unroll
          for (int jj = 0; jj < 8; ++jj)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int j = box * 8 + jj, row = warp * 16 + lane / 4 + 8 * h;
              const int byte = (8 * jj + 2 * (lane % 4)) * 2;
              *reinterpret_cast<typename kjit::Pairs<T>::type *>(
                  buffer + row * 128 + ((byte / 16) ^ (row % 8)) * 16 + byte % 16) =
                  kjit::Pairs<T>::pack(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            }
          // The copy engine reads what ordinary stores wrote: fence, then the store by one thread.
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          warpgroup_sync(consumer);
          if (thread == 0)
            store_box(&map_c, buffer, first_column, first_row);
        }
      } else {
        const int row0 = first_row + warp * 16 + lane / 4;
        const int column0 = tile_n * BLOCK_N + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            store_pair(row0 + 8 * h, column0 + 8 * j, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      }
    }
    if (EPILOGUE && thread == 0)
      stores_read<0>(); // the boxes' shared memory lives until the copy engine has read it
  }
  if (CLUSTER * SPLIT_K > 1)
    cluster_sync(); // no block leaves while a peer may still copy into it, arrive on it or read it
}

#endif
