#include "kjit/templates/library.hpp"

#include "kjit/error.hpp"
#include "kjit/templates/attention.hpp"
#include "kjit/text.hpp"

#include <algorithm>
#include <string>

namespace kjit::templates {

namespace embedded {
extern const std::string_view prelude_h;
extern const std::string_view scale_hip;
extern const std::string_view axpy_hip;
extern const std::string_view activation_hip;
extern const std::string_view rowwise_hip;
extern const std::string_view rotary_hip;
extern const std::string_view quant_hip;
extern const std::string_view gemm_hip;
extern const std::string_view gemm_mma_hip;
extern const std::string_view gemm_wgmma_hip;
extern const std::string_view gemm_mfma_hip;
extern const std::string_view gemm_staging_h;
extern const std::string_view mfma_h;
extern const std::string_view moe_routing_hip;
extern const std::string_view moe_wgmma_hip;
extern const std::string_view moe_wgmma_fp8_hip;
extern const std::string_view hopper_fp8_h;
extern const std::string_view flash_attention_hip;
extern const std::string_view hopper_h;
extern const std::string_view mma_sync_h;
extern const std::string_view flash_attention_mfma_hip;
extern const std::string_view attention_decode_hip;
extern const std::string_view kv_cache_hip;
extern const std::string_view gemm_fp8_hip;
extern const std::string_view gemm_fp8_mfma_hip;
extern const std::string_view moe_mfma_hip;
} // namespace embedded

namespace {

// Bytes of one element of the type parameter T.
std::int64_t element_bytes(const Instance &instance) {
  return instance.values().get("T").type() == "float" ? 4 : 2;
}

std::int64_t integer_value(const Instance &instance, std::string_view name) {
  return instance.values().get(name).integer();
}

// EPILOGUE 1's shared memory in the Hopper GEMMs (gemm_wgmma, gemm_fp8, moe_gemm_wgmma): two
// buffers of 64 x 64 16-bit elements for each of the two consumers (kjit::hopper::store_boxes).
constexpr std::int64_t store_boxes_bytes = 2 * 2 * 64 * 64 * 2;

// A vector access is at most 16 bytes (the prelude's widest load).
std::string vector_fits(const Instance &instance) {
  const std::int64_t bytes = integer_value(instance, "VEC") * element_bytes(instance);
  return bytes <= 16 ? "" : "VEC is " + std::to_string(bytes) + " bytes, more than 16";
}

// The row-wise kernels (rowwise.hip): VEC divides the row, a thread holds at most 64 elements,
// and a row takes at least a warp (kjit::row_reduce).
TuningRules rowwise_rules(std::string length) {
  TuningRules rules;
  rules.fits = [length](const Instance &instance, std::string_view target) -> std::string {
    const std::int64_t n = integer_value(instance, length), vec = integer_value(instance, "VEC"),
                       threads = integer_value(instance, "THREADS");
    if (std::string why = vector_fits(instance); !why.empty())
      return why;
    if (n % vec != 0)
      return "VEC " + std::to_string(vec) + " does not divide " + length + " " + std::to_string(n);
    if ((n / vec + threads - 1) / threads * vec > 64)
      return "a thread would hold more than 64 elements";
    const std::int64_t warp = target.starts_with("sm_") ? 32 : 64;
    if (threads < warp)
      return "THREADS " + std::to_string(threads) + " is less than a warp";
    return "";
  };
  // KJIT_ROW_BOUNDS: a block is THREADS threads, or 256 when several rows share it.
  rules.threads = [](const Instance &instance) {
    return std::max<std::int64_t>(integer_value(instance, "THREADS"), 256);
  };
  return rules;
}

// The activations and the row-wise operators (norms, softmax): see their sources for what each
// parameter means. Every one takes T among `element_types` and a vector width VEC (elements per
// access: 16 bytes is 4 floats or 8 halves); the row-wise ones also HIDDEN (COLS), the row's
// length, unrolled by the compiler, and THREADS per row.
void add_activations_and_rowwise(std::vector<Template> &all,
                                 const std::vector<std::string> &element_types) {
  const auto vec = [] { return ParamSchema::one_of({1, 2, 4, 8}, 4).tunable(); };
  const auto threads = [] {
    return ParamSchema::one_of({32, 64, 128, 256, 512, 1024}, 256).tunable();
  };
  TuningRules activation_rules;
  activation_rules.fits = [](const Instance &instance, std::string_view) {
    return vector_fits(instance);
  };
  // A thread holds at most 64 elements of a row, so 1024 threads cover 65536 at most; 32768
  // keeps every default-width variant within float's 32 per thread.
  const auto hidden = [] { return ParamSchema::integer(1, 32768, 4096); };
  all.emplace_back(
      "activation", std::string(embedded::activation_hip),
      std::vector<ParamDecl>{
          {"ACT", ParamSchema::type({"silu", "gelu", "gelu_tanh", "relu", "sigmoid"}, "silu")},
          {"T", ParamSchema::type(element_types, "float")},
          {"VEC", vec()}},
      TemplateOptions{.arguments = {"T*", "const T*", "long long"}, .tuning = activation_rules});
  all.emplace_back(
      "gated_activation", std::string(embedded::activation_hip),
      std::vector<ParamDecl>{{"ACT", ParamSchema::type({"silu", "gelu", "gelu_tanh"}, "silu")},
                             {"T", ParamSchema::type(element_types, "float")},
                             {"VEC", vec()}},
      TemplateOptions{.arguments = {"T*", "const T*", "int", "int"}, .tuning = activation_rules});
  const auto row_params = [&](const char *length) {
    return std::vector<ParamDecl>{{"T", ParamSchema::type(element_types, "float")},
                                  {length, hidden()},
                                  {"VEC", vec()},
                                  {"THREADS", threads()}};
  };
  all.emplace_back("rms_norm", std::string(embedded::rowwise_hip), row_params("HIDDEN"),
                   TemplateOptions{.arguments = {"T*", "const T*", "const T*", "float", "int"},
                                   .tuning = rowwise_rules("HIDDEN")});
  all.emplace_back("fused_add_rms_norm", std::string(embedded::rowwise_hip), row_params("HIDDEN"),
                   TemplateOptions{.arguments = {"T*", "T*", "const T*", "float", "int"},
                                   .tuning = rowwise_rules("HIDDEN")});
  all.emplace_back(
      "layer_norm", std::string(embedded::rowwise_hip), row_params("HIDDEN"),
      TemplateOptions{.arguments = {"T*", "const T*", "const T*", "const T*", "float", "int"},
                      .tuning = rowwise_rules("HIDDEN")});
  all.emplace_back("softmax", std::string(embedded::rowwise_hip), row_params("COLS"),
                   TemplateOptions{.arguments = {"T*", "const T*", "float", "int", "int"},
                                   .tuning = rowwise_rules("COLS")});
}

// Rotary embedding, per-token quantisation and the GEMM (kjit::ops). Row and head lengths are
// parameters so that the compiler unrolls; VEC is the packed access width the operator picks
// from the alignment of its pointers.
void add_rotary_quant_gemm(std::vector<Template> &all,
                           const std::vector<std::string> &element_types) {
  all.emplace_back("rotary_embedding", std::string(embedded::rotary_hip),
                   std::vector<ParamDecl>{{"T", ParamSchema::type(element_types, "float")},
                                          {"HEAD_SIZE", ParamSchema::integer(2, 1024, 128)},
                                          {"ROTARY_DIM", ParamSchema::integer(2, 1024, 128)},
                                          {"NEOX", ParamSchema::one_of({0, 1}, 1)},
                                          {"VEC", ParamSchema::one_of({1, 2, 4, 8}, 2)}},
                   TemplateOptions{.arguments = {"const long long*", "T*", "T*", "const T*", "int",
                                                 "int", "int"}});
  const auto quant_params = [&] {
    return std::vector<ParamDecl>{{"T", ParamSchema::type(element_types, "float")},
                                  {"HIDDEN", ParamSchema::integer(1, 65536, 4096)},
                                  {"VEC", ParamSchema::one_of({1, 2, 4, 8}, 4)},
                                  {"THREADS", ParamSchema::one_of({64, 128, 256, 512, 1024}, 256)}};
  };
  all.emplace_back("dynamic_per_token_quant_int8", std::string(embedded::quant_hip), quant_params(),
                   TemplateOptions{.arguments = {"signed char*", "float*", "const T*"}});
  // fp8 from cuda_fp8.h; hiprtc has no fp8 type.
  all.emplace_back("dynamic_per_token_quant_fp8", std::string(embedded::quant_hip), quant_params(),
                   TemplateOptions{.compile_options = {"-DKJIT_QUANT_FP8"},
                                   .arguments = {"unsigned char*", "float*", "const T*"},
                                   .targets = {"nvidia"}});
  const std::vector<std::string> gemm_arguments = {"T*",  "const T*", "const T*",
                                                   "int", "int",      "int"};
  const ParamSchema block = ParamSchema::one_of({16, 32, 64, 128, 256}, 128);
  const ParamSchema thread = ParamSchema::one_of({1, 2, 4, 8}, 8);
  const HeaderFile gemm_staging{"kjit/gemm_staging.h", std::string(embedded::gemm_staging_h)};
  const HeaderFile mma_sync{"kjit/mma_sync.h", std::string(embedded::mma_sync_h)};
  all.emplace_back("gemm", std::string(embedded::gemm_hip),
                   std::vector<ParamDecl>{{"T", ParamSchema::type(element_types, "half")},
                                          {"BLOCK_M", block},
                                          {"BLOCK_N", block},
                                          {"BLOCK_K", ParamSchema::one_of({8, 16, 32}, 16)},
                                          {"THREAD_M", thread},
                                          {"THREAD_N", thread}},
                   TemplateOptions{.arguments = gemm_arguments});
  // The same GEMM on tensor cores, for the 16-bit types, with `workers` (warps or waves) along
  // each dimension of the block: the parameters are named <workers>_M and <workers>_N.
  const auto tensor_core_params = [](const std::string &workers, int default_n) {
    return std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "half")},
                                  {"BLOCK_M", ParamSchema::one_of({64, 128, 256}, 128)},
                                  {"BLOCK_N", ParamSchema::one_of({64, 128, 256}, 128)},
                                  {"BLOCK_K", ParamSchema::one_of({16, 32, 64}, 32)},
                                  {workers + "_M", ParamSchema::one_of({1, 2, 4}, 2)},
                                  {workers + "_N", ParamSchema::one_of({1, 2, 4}, default_n)}};
  };
  // NVIDIA's (mma.sync, sm_80 and newer), with 32-lane warps.
  all.emplace_back("gemm_mma", std::string(embedded::gemm_mma_hip), tensor_core_params("WARPS", 4),
                   TemplateOptions{.headers = {gemm_staging, mma_sync},
                                   .arguments = gemm_arguments,
                                   .targets = {"sm_80+"}});
  // AMD's matrix cores (MFMA, gfx942 and gfx950), with 64-lane wavefronts.
  all.emplace_back(
      "gemm_mfma", std::string(embedded::gemm_mfma_hip), tensor_core_params("WAVES", 2),
      TemplateOptions{.headers = {gemm_staging, {"kjit/mfma.h", std::string(embedded::mfma_h)}},
                      .arguments = gemm_arguments,
                      .targets = {"gfx942", "gfx950"}});
  // A @ W^T for a few rows of A (decode), on NVIDIA tensor cores (mma.sync, sm_80 and newer):
  // streams the weight W [N, K] once (gemm_mma.hip's second kernel).
  all.emplace_back(
      "linear_skinny", std::string(embedded::gemm_mma_hip),
      std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")},
                             {"M_TILE", ParamSchema::one_of({8, 16, 32, 64}, 16).tunable()},
                             {"ROW_BLOCKS", ParamSchema::one_of({1, 2, 4}, 2).tunable()},
                             {"WARPS", ParamSchema::one_of({2, 4, 8, 16}, 8).tunable()},
                             {"UNROLL", ParamSchema::one_of({1, 2, 4, 8}, 4).tunable()}},
      TemplateOptions{
          .headers = {gemm_staging, mma_sync}, .arguments = gemm_arguments, .targets = {"sm_80+"}});
  // A @ W^T for tens of rows of A (8 to 128), on sm_90 and newer: W streamed as by
  // linear_skinny, A staged once per block in shared memory (two slices in flight), K split over
  // the SPLITS blocks of a cluster that add their sums in distributed shared memory (gemm_mma.hip's
  // third kernel).
  TuningRules splitk_rules;
  splitk_rules.fits = [](const Instance &instance, std::string_view) -> std::string {
    const std::int64_t m_tile = integer_value(instance, "M_TILE");
    const std::int64_t rows =
        16 * integer_value(instance, "ROW_BLOCKS") * integer_value(instance, "WARPS");
    const std::int64_t bytes = std::max(2 * m_tile * (integer_value(instance, "K_SLICE") + 8) * 2,
                                        m_tile * (rows + 4) * 4);
    return bytes <= 48 * 1024 ? ""
                              : "A's two slices or the partial sums need " + std::to_string(bytes) +
                                    " bytes, more than 48 KiB";
  };
  all.emplace_back(
      "linear_splitk", std::string(embedded::gemm_mma_hip),
      std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")},
                             {"M_TILE", ParamSchema::one_of({8, 16, 32, 64, 128}, 64).tunable()},
                             {"ROW_BLOCKS", ParamSchema::one_of({1, 2}, 1).tunable()},
                             {"WARPS", ParamSchema::one_of({4, 8}, 4).tunable()},
                             {"K_SLICE", ParamSchema::one_of({64, 128, 256}, 128).tunable()},
                             {"SPLITS", ParamSchema::one_of({1, 2, 4, 8}, 4).tunable()}},
      TemplateOptions{.headers = {gemm_staging, mma_sync},
                      .arguments = gemm_arguments,
                      .tuning = splitk_rules,
                      .targets = {"sm_90+"}});
  // The same GEMM on Hopper (sm_90a): wgmma fed by TMA, A, B and C passed as tensor maps.
  // B_KMAJOR = 1 reads B as an nn.Linear weight [N, K] (C = A @ W^T). CLUSTER_M or CLUSTER_N = 2:
  // clusters of two blocks sharing B's or A's tiles through multicast copies (at most one of them
  // 2). EPILOGUE 1 stores C through shared memory and the copy engine, 0 from registers.
  // SHAPE_M/N/K: a size fixed at compile time (0: the run-time argument).
  // gemm_wgmma's clusters are of one or two blocks: a tuner's search space over CLUSTER_M and
  // CLUSTER_N drops the pair of 2s before compiling it, and SPLIT_K's clusters take one tile.
  // Tiles narrower than 64 columns and SWAP_AB's transposed C store from registers.
  TuningRules wgmma_rules;
  wgmma_rules.fits = [](const Instance &instance, std::string_view) -> std::string {
    const std::int64_t block_n = integer_value(instance, "BLOCK_N");
    const bool register_epilogue = integer_value(instance, "EPILOGUE") == 0;
    if (integer_value(instance, "CLUSTER_M") * integer_value(instance, "CLUSTER_N") > 2)
      return "CLUSTER_M and CLUSTER_N make clusters of more than two blocks";
    if (integer_value(instance, "SPLIT_K") > 1 &&
        (integer_value(instance, "CLUSTER_M") * integer_value(instance, "CLUSTER_N") > 1 ||
         !register_epilogue || block_n > 128))
      return "SPLIT_K > 1 takes CLUSTER_M = CLUSTER_N = 1, EPILOGUE 0 and BLOCK_N 128 or less";
    if ((block_n < 64 || integer_value(instance, "SWAP_AB") == 1) &&
        (!register_epilogue || integer_value(instance, "B_KMAJOR") == 0))
      return "BLOCK_N below 64 and SWAP_AB take EPILOGUE 0 and B_KMAJOR 1";
    if (integer_value(instance, "BLOCK_M") == 64 && integer_value(instance, "SWAP_AB") == 0)
      return "BLOCK_M 64 takes SWAP_AB 1";
    return "";
  };
  // The stages (BLOCK_M rows of A and BLOCK_N of B, 64 of K, 2 bytes each), C's four 64 x 64 boxes
  // for EPILOGUE 1, SPLIT_K's float sums of a tile and their two mbarriers, the slack to align
  // the stages to 1024 bytes, and two mbarriers per stage.
  wgmma_rules.shared_bytes = [](const Instance &instance) -> std::int64_t {
    const std::int64_t block_n = integer_value(instance, "BLOCK_N"),
                       block_m = integer_value(instance, "BLOCK_M"),
                       stages = integer_value(instance, "STAGES");
    return stages * (block_m + block_n) * 64 * 2 +
           integer_value(instance, "EPILOGUE") * store_boxes_bytes +
           (integer_value(instance, "SPLIT_K") > 1 ? block_m * block_n * 4 + 16 : 0) + 1024 +
           stages * 16;
  };
  all.emplace_back(
      "gemm_wgmma", std::string(embedded::gemm_wgmma_hip),
      std::vector<ParamDecl>{
          {"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")},
          {"BLOCK_N", ParamSchema::one_of({16, 32, 64, 128, 256}, 256).tunable()},
          {"STAGES", ParamSchema::one_of({3, 4, 5, 6, 8, 10, 12}, 4).tunable()},
          {"B_KMAJOR", ParamSchema::one_of({0, 1}, 0)},
          {"GROUP_M", ParamSchema::one_of({1, 2, 4, 8, 16}, 8).tunable()},
          {"CLUSTER_M", ParamSchema::one_of({1, 2}, 1).tunable()},
          {"CLUSTER_N", ParamSchema::one_of({1, 2}, 1).tunable()},
          {"EPILOGUE", ParamSchema::one_of({0, 1}, 1).tunable()},
          {"SPLIT_K", ParamSchema::one_of({1, 2, 4, 8}, 1).tunable()},
          {"SWAP_AB", ParamSchema::one_of({0, 1}, 0).tunable()},
          {"BLOCK_M", ParamSchema::one_of({64, 128}, 128).tunable()},
          {"SHAPE_M", ParamSchema::integer(0, 1 << 30, 0)},
          {"SHAPE_N", ParamSchema::integer(0, 1 << 30, 0)},
          {"SHAPE_K", ParamSchema::integer(0, 1 << 30, 0)}},
      TemplateOptions{.headers = {HeaderFile{"kjit/hopper.h", std::string(embedded::hopper_h)}},
                      .arguments = {"T*", "const kjit::TensorMap", "const kjit::TensorMap",
                                    "const kjit::TensorMap", "int", "int", "int"},
                      .tuning = wgmma_rules,
                      .targets = {"sm_90a"}});
}

// A mixture-of-experts layer (kjit::ops, moe.hpp): routing, the sort of the token-expert pairs
// by expert and the gathers around the grouped GEMM (moe_routing.hip, both vendors), and the
// grouped GEMM on Hopper (moe_wgmma.hip, sm_90a).
void add_moe(std::vector<Template> &all, const std::vector<std::string> &element_types) {
  const std::string routing(embedded::moe_routing_hip);
  all.emplace_back("moe_topk", routing,
                   std::vector<ParamDecl>{{"T", ParamSchema::type(element_types, "bfloat16")},
                                          {"EXPERTS", ParamSchema::integer(1, 512, 8)},
                                          {"TOPK", ParamSchema::integer(1, 32, 2)},
                                          {"SCORING", ParamSchema::one_of({0, 1}, 0)},
                                          {"GROUPS", ParamSchema::integer(1, 64, 1)},
                                          {"TOPK_GROUP", ParamSchema::integer(1, 64, 1)}},
                   TemplateOptions{.arguments = {"float*", "int*", "const T*", "const float*",
                                                 "int", "int", "float"}});
  // BLOCK_M is the grouped GEMM's tile of rows (moe_gemm_wgmma's 128).
  all.emplace_back(
      "moe_align", routing,
      std::vector<ParamDecl>{{"EXPERTS", ParamSchema::integer(1, 256, 8)},
                             {"BLOCK_M", ParamSchema::one_of({16, 32, 64, 128}, 128)},
                             {"COUNT", ParamSchema::one_of({0, 1}, 1)}},
      TemplateOptions{.arguments = {"int*", "int*", "int*", "int*", "const int*", "int", "int*"}});
  const auto vec_params = [&] {
    return std::vector<ParamDecl>{{"T", ParamSchema::type(element_types, "bfloat16")},
                                  {"VEC", ParamSchema::one_of({1, 2, 4, 8}, 8)}};
  };
  // ROWS: the rows a block copies (blockDim.x / ROWS threads each); CACHE 1: streaming stores
  // (NVIDIA's st.global.cs; HIP stores plainly).
  std::vector<ParamDecl> gather_params = vec_params();
  gather_params.push_back({"ROWS", ParamSchema::one_of({1, 2, 4, 8, 16}, 1)});
  gather_params.push_back({"CACHE", ParamSchema::one_of({0, 1}, 0)});
  all.emplace_back("moe_gather", routing, std::move(gather_params),
                   TemplateOptions{.arguments = {"T*", "const T*", "const int*", "const int*",
                                                 "int", "int", "int"}});
  all.emplace_back(
      "moe_combine", routing, vec_params(),
      TemplateOptions{.arguments = {"T*", "const T*", "const float*", "const int*", "int", "int"}});
  // fused_moe at one token: the weights read row by row, no sort (moe_routing.hip).
  all.emplace_back("moe_decode_gate_up", routing, vec_params(),
                   TemplateOptions{.arguments = {"T*", "const T*", "const T*", "const int*", "int",
                                                 "int", "int", "int", "int"}});
  all.emplace_back("moe_decode_down", routing, vec_params(),
                   TemplateOptions{.arguments = {"T*", "const T*", "const T*", "const float*",
                                                 "const int*", "int", "int", "int", "int", "int"}});
  // GATED 1: the gate and up projections with silu_and_mul in the epilogue (BLOCK_N output
  // columns, a wgmma of twice as many); 0: the down projection. GATHER 1: A's rows are copied
  // from the tokens' rows (x, sorted_pairs, top_k), not read from a sorted A through map_a.
  // PINGPONG 1: the two consumers take whole tiles in turns, one's epilogue under the other's
  // MMAs (a wgmma of 128 columns only: 128 rows of 256 outgrow a consumer's registers).
  // EPILOGUE 1: C is stored through shared memory by the copy engine (map_c), 0: from registers.
  // SKIP_PADDING 1: with PINGPONG 0, consumer 1 skips the MMAs and stores of a tile's second 64
  // rows where they are all padding (sorted_pairs -1).
  TuningRules moe_rules;
  const auto wgmma_columns = [](const Instance &instance) {
    return integer_value(instance, "BLOCK_N") * (integer_value(instance, "GATED") + 1);
  };
  // The stages (128 rows of A, a wgmma's columns of B, 64 of K, 2 bytes each), the slack to align
  // them to 1024 bytes, EPILOGUE 1's two boxes of 64 x 64 per consumer, two mbarriers per stage,
  // the tile ring's four mbarriers and two slots.
  moe_rules.shared_bytes = [wgmma_columns](const Instance &instance) -> std::int64_t {
    const std::int64_t stages = integer_value(instance, "STAGES");
    const std::int64_t epilogue = integer_value(instance, "EPILOGUE") * store_boxes_bytes;
    return stages * (128 + wgmma_columns(instance)) * 64 * 2 + 1024 + epilogue + stages * 16 + 40;
  };
  moe_rules.fits = [wgmma_columns, shared_bytes = moe_rules.shared_bytes](
                       const Instance &instance, std::string_view) -> std::string {
    const std::int64_t wgmma_n = wgmma_columns(instance);
    if (wgmma_n != 128 && wgmma_n != 256)
      return "BLOCK_N makes a wgmma of " + std::to_string(wgmma_n) + " columns, not 128 or 256";
    if (integer_value(instance, "PINGPONG") == 1 && wgmma_n != 128)
      return "PINGPONG takes a wgmma of 128 columns, not " + std::to_string(wgmma_n);
    if (shared_bytes(instance) > 227 * 1024)
      return "the stages need more than 227 KiB of shared memory";
    return "";
  };
  all.emplace_back(
      "moe_gemm_wgmma", std::string(embedded::moe_wgmma_hip),
      std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")},
                             {"BLOCK_N", ParamSchema::one_of({64, 128, 256}, 128).tunable()},
                             {"STAGES", ParamSchema::one_of({3, 4, 5, 6}, 4).tunable()},
                             {"GATED", ParamSchema::one_of({0, 1}, 1)},
                             {"GROUP_M", ParamSchema::one_of({1, 2, 4, 8, 16}, 8).tunable()},
                             {"GATHER", ParamSchema::one_of({0, 1}, 0)},
                             {"PINGPONG", ParamSchema::one_of({0, 1}, 0).tunable()},
                             {"EPILOGUE", ParamSchema::one_of({0, 1}, 0).tunable()},
                             {"SKIP_PADDING", ParamSchema::one_of({0, 1}, 1).tunable()}},
      TemplateOptions{.headers = {HeaderFile{"kjit/hopper.h", std::string(embedded::hopper_h)}},
                      .arguments = {"T*", "const kjit::TensorMap", "const kjit::TensorMap",
                                    "const int*", "const int*", "int", "int", "const T*",
                                    "const int*", "int", "int*", "const kjit::TensorMap"},
                      .tuning = moe_rules,
                      .targets = {"sm_90a"}});
  // fused_moe with e4m3 weights and 128 x 128 block scales (moe_wgmma_fp8.hip): the activations'
  // 1 x 128 quantisation, then the grouped e4m3 GEMM with a wgmma of 128 columns (64 gate and 64
  // up when GATED).
  const std::string fp8(embedded::moe_wgmma_fp8_hip);
  const std::vector<HeaderFile> fp8_headers = {
      {"kjit/hopper.h", std::string(embedded::hopper_h)},
      {"kjit/hopper_fp8.h", std::string(embedded::hopper_fp8_h)}};
  all.emplace_back(
      "moe_quantize_fp8", fp8,
      std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")}},
      TemplateOptions{.headers = fp8_headers,
                      .arguments = {"unsigned char*", "float*", "const T*", "const int*",
                                    "const int*", "int", "int"},
                      .targets = {"sm_90a"}});
  all.emplace_back(
      "moe_gemm_fp8", fp8,
      std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")},
                             {"STAGES", ParamSchema::one_of({3, 4, 5, 6}, 6).tunable()},
                             {"GATED", ParamSchema::one_of({0, 1}, 1)},
                             {"GROUP_M", ParamSchema::one_of({1, 2, 4, 8, 16}, 8).tunable()}},
      TemplateOptions{.headers = fp8_headers,
                      .arguments = {"T*", "const kjit::TensorMap", "const kjit::TensorMap",
                                    "const float*", "const float*", "const int*", "const int*",
                                    "int", "int"},
                      .targets = {"sm_90a"}});
}

// Attention's forward on Hopper (sm_90a): wgmma fed by TMA, q, k and v passed as tensor maps.
// CONSUMERS warpgroups of 64 query rows each, BLOCK_N keys per tile, STAGES tiles of k and v in
// flight, PINGPONG 1: two consumers issue their products in turns, PERSISTENT 1: a block per
// multiprocessor walks the items, PAGED 1 or 2: k and v come from a paged cache through block
// tables, copied by TMA a page at a time (1) or by the producer's threads a key at a time (2),
// Q_BUFFERS 2: the next item's q is copied while this one's is read, STAGE_O 1: the output goes
// through shared memory and bulk copies (flash_attention.hip, as its kernel flash_attention_mma
// is below).
void add_attention(std::vector<Template> &all) {
  const std::vector<HeaderFile> headers = {{"kjit/hopper.h", std::string(embedded::hopper_h)},
                                           {"kjit/mma_sync.h", std::string(embedded::mma_sync_h)}};
  TuningRules rules;
  rules.shared_bytes = [](const Instance &instance) {
    return flash_attention_shared_bytes(
        integer_value(instance, "HEAD_DIM"), integer_value(instance, "CONSUMERS"),
        integer_value(instance, "BLOCK_N"), integer_value(instance, "STAGES"),
        integer_value(instance, "Q_BUFFERS"), integer_value(instance, "STAGE_O"));
  };
  rules.threads = [](const Instance &instance) {
    return 128 * (integer_value(instance, "CONSUMERS") + 1);
  };
  // Three consumers' threads have 128 registers each (65536 / 512): S, P and O of 64-wide tiles
  // fit them, wider ones spill and serialise wgmma (ptxas's C7512).
  rules.fits = [](const Instance &instance, std::string_view) -> std::string {
    if (integer_value(instance, "CONSUMERS") == 3 &&
        (integer_value(instance, "HEAD_DIM") > 64 || integer_value(instance, "BLOCK_N") > 64))
      return "three consumers fit only HEAD_DIM and BLOCK_N of 64 in their registers";
    if (integer_value(instance, "PINGPONG") == 1 && integer_value(instance, "CONSUMERS") != 2)
      return "PINGPONG takes turns between two consumers";
    return "";
  };
  all.emplace_back(
      "flash_attention", std::string(embedded::flash_attention_hip),
      std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")},
                             {"HEAD_DIM", ParamSchema::one_of({64, 128}, 128)},
                             {"CAUSAL", ParamSchema::one_of({0, 1}, 0)},
                             {"CONSUMERS", ParamSchema::one_of({2, 3}, 2).tunable()},
                             {"BLOCK_N", ParamSchema::one_of({64, 128}, 128).tunable()},
                             {"STAGES", ParamSchema::one_of({2, 3}, 2).tunable()},
                             {"PINGPONG", ParamSchema::one_of({0, 1}, 1).tunable()},
                             {"PERSISTENT", ParamSchema::one_of({0, 1}, 1).tunable()},
                             {"PAGED", ParamSchema::one_of({0, 1, 2}, 0)},
                             {"Q_BUFFERS", ParamSchema::one_of({1, 2}, 1).tunable()},
                             {"STAGE_O", ParamSchema::one_of({0, 1}, 0).tunable()}},
      TemplateOptions{.headers = headers,
                      .arguments = {"T*", "const kjit::TensorMap", "const kjit::TensorMap",
                                    "const kjit::TensorMap", "const int*", "const int*", "int",
                                    "int", "int", "int", "int", "int", "float", "const int*", "int",
                                    "int", "const T*", "const T*"},
                      .tuning = rules,
                      .targets = {"sm_90a"}});
  // The same on sm_80 and newer with mma.sync: 64 query rows a block, BLOCK_N keys per tile.
  all.emplace_back(
      "flash_attention_mma", std::string(embedded::flash_attention_hip),
      std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")},
                             {"HEAD_DIM", ParamSchema::one_of({64, 128}, 128)},
                             {"CAUSAL", ParamSchema::one_of({0, 1}, 0)},
                             {"BLOCK_N", ParamSchema::one_of({32, 64}, 64).tunable()}},
      TemplateOptions{.headers = headers,
                      .arguments = {"T*", "const T*", "const T*", "const T*", "const int*",
                                    "const int*", "int", "int", "int", "int", "float"},
                      .targets = {"sm_80+"}});
}

// The same forward on AMD's matrix cores (MFMA, gfx942 and gfx950; flash_attention_mfma.hip):
// WAVES wavefronts of 32 query rows a block, BLOCK_N keys per tile, k and v^T staged in LDS;
// PAGED 1: k and v gathered from a paged cache through block tables.
void add_attention_mfma(std::vector<Template> &all) {
  TuningRules rules;
  rules.shared_bytes = [](const Instance &instance) -> std::int64_t {
    const std::int64_t head_dim = integer_value(instance, "HEAD_DIM");
    const std::int64_t block_n = integer_value(instance, "BLOCK_N");
    // Padded rows, and PAGED's flag of a page outside the cache.
    return (block_n * (head_dim + 8) + head_dim * (block_n + 8)) * 2 +
           (integer_value(instance, "PAGED") ? 4 : 0);
  };
  rules.threads = [](const Instance &instance) { return 64 * integer_value(instance, "WAVES"); };
  // A thread holds q, a tile's scores, O and the next tile's k and v (BLOCK_N x HEAD_DIM / 8 /
  // threads 16-byte chunks of each) through the MFMAs: with more than 4 chunks of each, or 64-key
  // tiles at head dim 128, the registers run out and hiprtc spills (BENCHMARKS.md).
  rules.fits = [](const Instance &instance, std::string_view) -> std::string {
    const std::int64_t head_dim = integer_value(instance, "HEAD_DIM");
    const std::int64_t block_n = integer_value(instance, "BLOCK_N");
    const std::int64_t chunks = block_n * head_dim / 8 / (64 * integer_value(instance, "WAVES"));
    if (chunks > 4)
      return "a thread would stage " + std::to_string(chunks) +
             " 16-byte chunks of k and of v, more than 4 (more WAVES or a smaller BLOCK_N)";
    if (head_dim == 128 && block_n == 64)
      return "head dim 128 takes BLOCK_N 32: 64-key tiles spill";
    return "";
  };
  all.emplace_back(
      "flash_attention_mfma", std::string(embedded::flash_attention_mfma_hip),
      std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")},
                             {"HEAD_DIM", ParamSchema::one_of({64, 128}, 128)},
                             {"CAUSAL", ParamSchema::one_of({0, 1}, 0)},
                             {"BLOCK_N", ParamSchema::one_of({32, 64}, 32).tunable()},
                             {"WAVES", ParamSchema::one_of({1, 2, 4}, 4).tunable()},
                             {"PAGED", ParamSchema::one_of({0, 1}, 0)}},
      TemplateOptions{.headers = {{"kjit/gemm_staging.h", std::string(embedded::gemm_staging_h)},
                                  {"kjit/mfma.h", std::string(embedded::mfma_h)}},
                      .arguments = {"T*", "const T*", "const T*", "const T*", "const int*",
                                    "const int*", "int", "int", "int", "int", "float", "const int*",
                                    "int", "int"},
                      .tuning = rules,
                      .targets = {"gfx942", "gfx950"}});
}

// Paged attention for decode, its split merge, and the KV-cache write (attention_decode.hip,
// kv_cache.hip: their parameters are described there). Portable code (16-byte loads, shuffles,
// shared memory; fp8 converted in integer arithmetic), so every target builds them.
void add_attention_decode(std::vector<Template> &all) {
  const auto element = [] { return ParamSchema::type({"half", "bfloat16"}, "bfloat16"); };
  const auto head_dim = [] { return ParamSchema::one_of({64, 128}, 128); };
  const auto kv_fp8 = [] { return ParamSchema::one_of({0, 1}, 0); };
  TuningRules decode_rules;
  decode_rules.threads = [](const Instance &instance) {
    return integer_value(instance, "WARPS") * 64; // the most a wave-64 target launches
  };
  // The ring of K and V steps in shared memory (attention_decode.hip): STAGES steps of UNROLL *
  // LOADS Chunks of K and of V per thread, a Chunk 16 bytes (8 for fp8). Static on AMD, within
  // 48 KiB; dynamic on NVIDIA, within the device's limit (checked against shared_bytes).
  const auto ring_bytes = [](const Instance &instance, std::int64_t warp) {
    return integer_value(instance, "STAGES") * 2 * integer_value(instance, "UNROLL") *
           integer_value(instance, "LOADS") * integer_value(instance, "WARPS") * warp *
           (integer_value(instance, "KV_FP8") != 0 ? 8 : 16);
  };
  decode_rules.shared_bytes = [ring_bytes](const Instance &instance) {
    return ring_bytes(instance, 64);
  };
  decode_rules.fits = [ring_bytes](const Instance &instance, std::string_view target) {
    const std::int64_t bytes = ring_bytes(instance, 64);
    return !target.starts_with("sm_") && bytes > 48 * 1024
               ? "the ring of K and V steps takes " + std::to_string(bytes) +
                     " bytes, past 48 KiB of static shared memory"
               : std::string();
  };
  all.emplace_back(
      "paged_attention_decode", std::string(embedded::attention_decode_hip),
      std::vector<ParamDecl>{{"T", element()},
                             {"KV_FP8", kv_fp8()},
                             {"HEAD_DIM", head_dim()},
                             {"PAGE", ParamSchema::one_of({16, 32}, 16)},
                             {"GROUP", ParamSchema::integer(1, 8, 4)},
                             {"WARPS", ParamSchema::one_of({2, 4, 8}, 4).tunable()},
                             {"UNROLL", ParamSchema::one_of({1, 2, 4}, 2).tunable()},
                             {"LOADS", ParamSchema::one_of({1, 2}, 1).tunable()},
                             {"STAGES", ParamSchema::one_of({2, 3, 4}, 3).tunable()}},
      TemplateOptions{.arguments = {"T*", "float*", "float*", "const T*", "const void*",
                                    "const void*", "const int*", "const int*", "float", "float",
                                    "int", "int", "int", "int", "int", "int"},
                      .tuning = decode_rules});
  all.emplace_back("paged_attention_merge", std::string(embedded::attention_decode_hip),
                   std::vector<ParamDecl>{{"T", element()}, {"HEAD_DIM", head_dim()}},
                   TemplateOptions{.arguments = {"T*", "const float*", "const float*", "int"}});
  all.emplace_back(
      "reshape_and_cache", std::string(embedded::kv_cache_hip),
      std::vector<ParamDecl>{{"T", element()},
                             {"KV_FP8", kv_fp8()},
                             {"HEAD_DIM", ParamSchema::integer(8, 1024, 128)},
                             {"ROPE", ParamSchema::one_of({0, 1, 2}, 0)},
                             {"ROTARY_DIM", ParamSchema::integer(0, 1024, 0)},
                             {"VEC", ParamSchema::one_of({1, 2, 4, 8}, 8)},
                             {"TOKENS", ParamSchema::one_of({1, 2, 4, 8}, 2).tunable()}},
      TemplateOptions{.arguments = {"const T*", "const T*", "void*", "void*", "const long long*",
                                    "const long long*", "const T*", "int", "float", "float", "int",
                                    "long long", "long long", "long long", "int"}});
}

// D = (A x scale_a) @ (B x scale_b)^T on Hopper from e4m3 A [M, K] and B [N, K] to bfloat16 D
// (gemm_fp8.hip): SCALING 0 per tensor, 1 row-wise (torch._scaled_mm's two forms), 2 DeepSeek-V3's
// 1 x 128 blocks of A and 128 x 128 blocks of B. A and B are passed as tensor maps.
void add_fp8_gemm(std::vector<Template> &all) {
  TuningRules rules;
  const auto shared_bytes = [](const Instance &instance) -> std::int64_t {
    // The stages (A's 128 x 128 bytes and B's BLOCK_N x 128), EPILOGUE 1's two 64 x 64 bfloat16
    // buffers per consumer, the 1024-byte alignment's slack and two mbarriers per stage.
    const std::int64_t stages = integer_value(instance, "STAGES");
    return stages * (128 + integer_value(instance, "BLOCK_N")) * 128 +
           (integer_value(instance, "EPILOGUE") == 1 ? store_boxes_bytes : 0) + 1024 + stages * 16;
  };
  rules.shared_bytes = shared_bytes;
  rules.fits = [shared_bytes](const Instance &instance, std::string_view) -> std::string {
    const std::int64_t block_n = integer_value(instance, "BLOCK_N");
    if (integer_value(instance, "SCALING") == 2 && block_n > 160 && block_n != 256)
      return "block scales take BLOCK_N of at most 160, or 256 in halves (the promoted sums' "
             "registers)";
    if (integer_value(instance, "SCALING") == 2 && integer_value(instance, "OVERLAP") == 1 &&
        block_n > 128)
      return "OVERLAP keeps two k-blocks' sums: BLOCK_N of at most 128";
    if (integer_value(instance, "A_REGISTERS") == 1 &&
        (integer_value(instance, "SCALING") != 2 || block_n != 256))
      return "A_REGISTERS serves block scales at BLOCK_N 256 (its halves share A's registers)";
    if (integer_value(instance, "EPILOGUE") == 1 && block_n % 64 != 0)
      return "EPILOGUE 1 stores boxes of 64 columns: BLOCK_N a multiple of 64";
    if (integer_value(instance, "EPILOGUE") == 1 && integer_value(instance, "SCALING") == 2 &&
        block_n == 256 && integer_value(instance, "PINGPONG") == 1)
      return "EPILOGUE 1 beside the halves' turns (PINGPONG) spills at 232 registers a consumer";
    if (shared_bytes(instance) > 227 * 1024)
      return "the stages (and EPILOGUE 1's buffers) need more than 227 KiB of shared memory";
    return "";
  };
  rules.threads = [](const Instance &) -> std::int64_t { return 384; };
  all.emplace_back(
      "gemm_fp8", std::string(embedded::gemm_fp8_hip),
      std::vector<ParamDecl>{
          {"BLOCK_N",
           ParamSchema::one_of({64, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256}, 128)
               .tunable()},
          {"STAGES", ParamSchema::one_of({3, 4, 5, 6, 7}, 5).tunable()},
          {"SCALING", ParamSchema::one_of({0, 1, 2}, 2)},
          {"GROUP_M", ParamSchema::one_of({1, 2, 4, 8, 16}, 8).tunable()},
          {"CLUSTER_M", ParamSchema::one_of({1, 2}, 1).tunable()},
          {"PINGPONG", ParamSchema::one_of({0, 1}, 0).tunable()},
          {"OVERLAP", ParamSchema::one_of({0, 1}, 1).tunable()},
          {"A_REGISTERS", ParamSchema::one_of({0, 1}, 0).tunable()},
          {"EPILOGUE", ParamSchema::one_of({0, 1}, 0).tunable()}},
      TemplateOptions{.headers = {{"kjit/hopper.h", std::string(embedded::hopper_h)},
                                  {"kjit/hopper_fp8.h", std::string(embedded::hopper_fp8_h)}},
                      .arguments = {"bfloat16*", "const float*", "const float*",
                                    "const kjit::TensorMap", "const kjit::TensorMap",
                                    "const kjit::TensorMap", "int", "int", "int"},
                      .tuning = rules,
                      .targets = {"sm_90a"}});
}

// AMD's matrix-core forms (gfx942, gfx950) of the FP8 GEMM and of the MoE grouped GEMM, with
// 2 x 2 waves of 64 lanes. gemm_fp8_mfma: gemm_fp8's contract and SCALING from pointers, on the
// target's fp8 encoding (e4m3fnuz on gfx942, OCP e4m3 on gfx950). moe_gemm_mfma: moe_gemm_wgmma's
// contract from pointers, over 128-row blocks of sorted rows; its source follows gemm_mfma.hip's,
// whose MFMA wrappers it calls.
void add_amd_fp8_and_moe(std::vector<Template> &all) {
  const HeaderFile gemm_staging{"kjit/gemm_staging.h", std::string(embedded::gemm_staging_h)};
  TuningRules fp8_rules;
  fp8_rules.fits = [](const Instance &instance, std::string_view) -> std::string {
    if (integer_value(instance, "SCALING") == 2 && integer_value(instance, "BLOCK_N") > 128)
      return "block scales take BLOCK_N of at most 128 (one block of B's scales per tile)";
    return "";
  };
  all.emplace_back(
      "gemm_fp8_mfma", std::string(embedded::gemm_fp8_mfma_hip),
      std::vector<ParamDecl>{{"BLOCK_M", ParamSchema::one_of({64, 128}, 128).tunable()},
                             {"BLOCK_N", ParamSchema::one_of({64, 128}, 128).tunable()},
                             {"SCALING", ParamSchema::one_of({0, 1, 2}, 2)}},
      TemplateOptions{.headers = {gemm_staging},
                      .arguments = {"bfloat16*", "const float*", "const float*",
                                    "const unsigned char*", "const unsigned char*", "int", "int",
                                    "int"},
                      .tuning = fp8_rules,
                      .targets = {"gfx942", "gfx950"}});
  all.emplace_back(
      "moe_gemm_mfma", std::string(embedded::moe_mfma_hip),
      std::vector<ParamDecl>{{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")},
                             {"BLOCK_N", ParamSchema::one_of({64, 128}, 64).tunable()},
                             {"GATED", ParamSchema::one_of({0, 1}, 1)}},
      TemplateOptions{
          .headers = {gemm_staging, {"kjit/mfma.h", std::string(embedded::mfma_h)}},
          .arguments = {"T*", "const T*", "const T*", "const int*", "const int*", "int", "int"},
          .targets = {"gfx942", "gfx950"}});
}

std::vector<Template> make_builtin() {
  // Local, not a namespace-scope global: builtin() may run during another translation unit's
  // static initialisation (a `const Template &t = find(...)` at namespace scope), before such a
  // global would be constructed.
  const std::vector<std::string> element_types = {"float", "half", "bfloat16"};
  std::vector<Template> all;
  all.emplace_back("axpy", std::string(embedded::axpy_hip),
                   std::vector<ParamDecl>{{"T", ParamSchema::type(element_types, "float")},
                                          {"ITEMS", ParamSchema::one_of({1, 2, 4, 8}, 4)}},
                   TemplateOptions{.arguments = {"const T*", "T*", "float", "int"}});
  all.emplace_back("scale", std::string(embedded::scale_hip),
                   std::vector<ParamDecl>{{"T", ParamSchema::type(element_types, "float")},
                                          {"N", ParamSchema::integer(1, 1 << 30)}},
                   TemplateOptions{.arguments = {"T*", "float"}});
  add_activations_and_rowwise(all, element_types);
  add_rotary_quant_gemm(all, element_types);
  add_moe(all, element_types);
  add_attention(all);
  add_attention_mfma(all);
  add_attention_decode(all);
  add_fp8_gemm(all);
  add_amd_fp8_and_moe(all);
  std::sort(all.begin(), all.end(),
            [](const Template &a, const Template &b) { return a.name() < b.name(); });
  return all;
}

} // namespace

const HeaderFile &prelude() {
  static const HeaderFile header{"kjit/prelude.h", std::string(embedded::prelude_h)};
  return header;
}

const std::vector<Template> &builtin() {
  static const std::vector<Template> all = make_builtin();
  return all;
}

const Template &find(std::string_view name) {
  const auto &all = builtin();
  auto found =
      std::find_if(all.begin(), all.end(), [&](const Template &t) { return t.name() == name; });
  if (found != all.end())
    return *found;
  throw Error(Errc::unknown_template,
              "unknown template '" + std::string(name) +
                  "'; known templates: " + join(all, ", ", &Template::name));
}

} // namespace kjit::templates
