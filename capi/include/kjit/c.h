/* kjit's C ABI: the one stable surface for callers in other languages (the Python package
 * `kjit` loads it with ctypes; Rust, Julia and C use it as it is). libkjit_c.so exports these
 * functions and nothing else.
 *
 * Every function that can fail returns a kjit_status: KJIT_OK (0) or the code of the failure,
 * one of kjit::Errc's plus one (KJIT_INTERNAL for anything else). The thread's last error then
 * holds the one-line message (kjit_last_error) and the detail block (kjit_last_error_detail: a
 * compiler log with the template's line numbers); both stay valid until the thread's next
 * failure. No exception ever crosses this interface.
 *
 * Handles: a runtime and a template are the caller's, freed with their destroy function. Code
 * objects and kernels belong to the runtime that returned them and live as long as it does.
 *
 * The cache's queries, tuning and prebuilding (since 1.1) run the `kjit` command's own code in the
 * caller's process and hand back the JSON document the command prints with --json. */
#ifndef KJIT_C_H
#define KJIT_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* KJIT_C_ABI_VERSION is bumped on any change to a declaration below that breaks a caller built
 * against it: such a caller must not call in (the Python package checks it when it loads the
 * library). KJIT_C_ABI_MINOR is bumped on additions only (each marked with the minor version that
 * added it): a caller needing minor N runs on any library of the same version and a minor >= N. */
#define KJIT_C_ABI_VERSION 1
#define KJIT_C_ABI_MINOR 5
uint32_t kjit_abi_version(void);
uint32_t kjit_abi_minor(void); /* since 1.1 */

typedef enum kjit_status {
  KJIT_OK = 0,
  KJIT_UNKNOWN_TEMPLATE = 1,
  KJIT_BAD_PARAMETER = 2,
  KJIT_BAD_TARGET = 3,
  KJIT_UNSUPPORTED_TARGET = 4,
  KJIT_BAD_OPTION = 5,
  KJIT_COMPILE_ERROR = 6,
  KJIT_COMPILER_UNAVAILABLE = 7,
  KJIT_CACHE_IO = 8,
  KJIT_NOT_PREBUILT = 9,
  KJIT_BAD_CONFIG = 10,
  KJIT_NO_DEVICE = 11,
  KJIT_DEVICE_ERROR = 12,
  KJIT_BAD_ARGUMENT = 13,
  KJIT_BAD_ARCHIVE = 14,
  KJIT_BAD_USAGE = 15,
  KJIT_FILE_IO = 16,
  KJIT_PROCESS_ERROR = 17,
  KJIT_INTERNAL = 100 /* not a kjit::Error: out of memory, a defect */
} kjit_status;

/* "bad parameter" for KJIT_BAD_PARAMETER (kjit::to_string of the Errc), "ok", "internal";
 * "unknown" for a value that is no status. */
const char *kjit_status_name(int status);
const char *kjit_last_error(void);
const char *kjit_last_error_detail(void);

typedef struct kjit_runtime kjit_runtime;
typedef struct kjit_template kjit_template;
typedef struct kjit_code kjit_code;
typedef struct kjit_kernel kjit_kernel;

/* ---- runtime ---------------------------------------------------------------------------- */

/* A runtime configured from the KJIT_* variables, as kjit::Runtime(). */
int kjit_runtime_create(kjit_runtime **out);
void kjit_runtime_destroy(kjit_runtime *runtime);

/* ---- templates -------------------------------------------------------------------------- */

typedef enum kjit_param_kind {
  KJIT_PARAM_TYPE = 0,    /* one of `types` */
  KJIT_PARAM_INTEGER = 1, /* an integer in [min, max] */
  KJIT_PARAM_ONE_OF = 2   /* one of `values` */
} kjit_param_kind;

/* One parameter of a template's schema. */
typedef struct kjit_param_decl {
  const char *name;
  int kind; /* kjit_param_kind */
  const char *const *types;
  size_t type_count;
  int64_t min, max;
  const int64_t *values;
  size_t value_count;
  const char *default_type; /* a type parameter's default; NULL: none */
  int has_default_integer;  /* an integer parameter's default is default_integer */
  int64_t default_integer;
  int tunable; /* changes how the kernel runs, not what it computes */
} kjit_param_decl;

/* One parameter value: a type (`type` not NULL) or an integer. */
typedef struct kjit_param {
  const char *name;
  const char *type;
  int64_t integer;
} kjit_param;

/* `kernel`: the __global__ function template's name (NULL: the template's name). `arguments`:
 * the kernel's parameter types as the source declares them ("const T*", "float"), which
 * launches are checked against. Fails with KJIT_BAD_PARAMETER for a malformed schema. */
int kjit_template_create(const char *name, const char *source, const kjit_param_decl *params,
                         size_t param_count, const char *const *arguments, size_t argument_count,
                         const char *kernel, kjit_template **out);
/* One of the templates built into the library ("scale", "rms_norm"...; `kjit templates` lists
 * them), as a handle to destroy like any other. KJIT_UNKNOWN_TEMPLATE names the known ones. */
int kjit_template_builtin(const char *name, kjit_template **out);
void kjit_template_destroy(kjit_template *tmpl);
const char *kjit_template_name(const kjit_template *tmpl);

/* ---- compiling -------------------------------------------------------------------------- */

/* The variant for `params` on `target` ("gfx90a", "sm_90"): from memory, a cache tier, or
 * compiled and stored, as kjit::Runtime::compile. */
int kjit_compile(kjit_runtime *runtime, const kjit_template *tmpl, const kjit_param *params,
                 size_t param_count, const char *target, const kjit_code **out);
void kjit_code_bytes(const kjit_code *code, const void **data, size_t *size);
const char *kjit_code_key(const kjit_code *code);    /* 64 hex digits */
const char *kjit_code_target(const kjit_code *code); /* canonical id */
const char *kjit_code_origin(const kjit_code *code); /* compiled, user cache, prebuilt, remote */
const char *kjit_code_expression(const kjit_code *code);   /* "scale<__half, 4096>" */
const char *kjit_code_lowered_name(const kjit_code *code); /* the kernel's symbol */
const char *kjit_code_entry_path(const kjit_code *code);   /* "" when in memory only */
double kjit_code_compile_ms(const kjit_code *code);

/* ---- kernels and launches --------------------------------------------------------------- */

/* The variant compiled for the GPU `device` (its ordinal; -1: the runtime's default device),
 * loaded and ready to launch, checked against the template's declared argument types. */
int kjit_kernel_get(kjit_runtime *runtime, const kjit_template *tmpl, const kjit_param *params,
                    size_t param_count, int device, const kjit_kernel **out);
const char *kjit_kernel_name(const kjit_kernel *kernel);
int kjit_kernel_device(const kjit_kernel *kernel);          /* the device's ordinal */
const char *kjit_kernel_backend(const kjit_kernel *kernel); /* "HIP" or "CUDA" (since 1.1) */
void *kjit_kernel_native_handle(const kjit_kernel *kernel); /* CUfunction, hipFunction_t */
size_t kjit_kernel_arg_count(const kjit_kernel *kernel);
/* The type ("half*") and size in bytes of argument `index`; NULL and 0 past the last one. */
const char *kjit_kernel_arg_type(const kjit_kernel *kernel, size_t index);
uint32_t kjit_kernel_arg_size(const kjit_kernel *kernel, size_t index);

typedef struct kjit_launch_config {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t reserved; /* 0 */
  void *stream;      /* CUstream, hipStream_t; NULL: the device's default stream */
} kjit_launch_config;

/* Launches with `args[i]` pointing to argument i's value of `sizes[i]` bytes. Fails with
 * KJIT_BAD_ARGUMENT naming the kernel when the count or a size differs from its parameters. */
int kjit_kernel_launch(const kjit_kernel *kernel, const kjit_launch_config *config,
                       void *const *args, const uint32_t *sizes, size_t arg_count);
/* The same from one block of memory, for callers that pack a launch in one step (the Python
 * package: one struct.pack per call): a kjit_launch_config at offset 0, then argument i's value
 * at kjit_kernel_arg_offset(i), kjit_kernel_packed_size() bytes in all. Not checked: each value
 * must be exactly its parameter's size. */
int kjit_kernel_launch_packed(const kjit_kernel *kernel, const void *packed);
uint32_t kjit_kernel_arg_offset(const kjit_kernel *kernel, size_t index); /* 0 past the last */
uint32_t kjit_kernel_packed_size(const kjit_kernel *kernel);

/* ---- operators (kjit/ops/ops.hpp), on the runtime's default device ----------------------- */

typedef enum kjit_dtype { KJIT_FLOAT32 = 0, KJIT_FLOAT16 = 1, KJIT_BFLOAT16 = 2 } kjit_dtype;
typedef enum kjit_activation_kind {
  KJIT_SILU = 0,
  KJIT_GELU = 1,
  KJIT_GELU_TANH = 2,
  KJIT_RELU = 3,
  KJIT_SIGMOID = 4
} kjit_activation_kind;

/* The default device's ordinal (-1 and an error when there is none). */
int kjit_default_device(kjit_runtime *runtime, int *ordinal);

int kjit_rms_norm(kjit_runtime *rt, int dtype, void *out, const void *x, const void *weight,
                  float eps, int rows, int hidden, void *stream);
int kjit_fused_add_rms_norm(kjit_runtime *rt, int dtype, void *x, void *residual,
                            const void *weight, float eps, int rows, int hidden, void *stream);
int kjit_layer_norm(kjit_runtime *rt, int dtype, void *out, const void *x, const void *weight,
                    const void *bias, float eps, int rows, int hidden, void *stream);
int kjit_softmax(kjit_runtime *rt, int dtype, void *out, const void *x, float scale, int rows,
                 int cols, int causal_queries, void *stream);
/* out = f(x) element-wise over n elements. */
int kjit_activation(kjit_runtime *rt, int activation, int dtype, void *out, const void *x,
                    int64_t n, void *stream);
/* out [rows, d] = f(x[:, :d]) * x[:, d:] for x [rows, 2d]; SILU, GELU or GELU_TANH. */
int kjit_activation_and_mul(kjit_runtime *rt, int activation, int dtype, void *out, const void *x,
                            int rows, int d, void *stream);
/* style 0: neox, 1: gptj. */
int kjit_rotary_embedding(kjit_runtime *rt, int dtype, const int64_t *positions, void *query,
                          void *key, const void *cos_sin_cache, int max_position, int tokens,
                          int q_heads, int kv_heads, int head_size, int rotary_dim, int style,
                          void *stream);
int kjit_quant_int8(kjit_runtime *rt, int dtype, int8_t *out, float *scales, const void *input,
                    int rows, int hidden, void *stream);
int kjit_quant_fp8(kjit_runtime *rt, int dtype, uint8_t *out, float *scales, const void *input,
                   int rows, int hidden, void *stream);
/* c [m, n] = a [m, k] @ b [k, n]. */
int kjit_gemm(kjit_runtime *rt, int dtype, void *c, const void *a, const void *b, int m, int n,
              int k, void *stream);
/* c [m, n] = a [m, k] @ w [n, k]^T. */
int kjit_linear(kjit_runtime *rt, int dtype, void *c, const void *a, const void *w, int m, int n,
                int k, void *stream);

/* ---- attention (kjit/ops/flash_attention.hpp; since 1.2) -------------------------------- */

/* Prefill attention over ragged batches: q and out [total_q, q_heads, head_dim], k and v
 * [total_k, kv_heads, head_dim], cu_seqlens_q and cu_seqlens_k int32 [batch + 1]; causal 0 or 1
 * (aligned to the bottom right). FLOAT16 and BFLOAT16. */
int kjit_flash_attention(kjit_runtime *rt, int dtype, void *out, const void *q, const void *k,
                         const void *v, const int *cu_seqlens_q, const int *cu_seqlens_k, int batch,
                         int total_q, int total_k, int max_seqlen_q, int q_heads, int kv_heads,
                         int head_dim, int causal, float scale, void *stream);

/* ---- mixture of experts (kjit/ops/moe.hpp; since 1.2) ------------------------------------ */

typedef enum kjit_moe_scoring { KJIT_MOE_SOFTMAX = 0, KJIT_MOE_SIGMOID = 1 } kjit_moe_scoring;

/* logits [tokens, experts] to weights (float) and ids (int32) [tokens, top_k]: vLLM's
 * topk_softmax; renormalize 0 or 1. */
int kjit_topk_softmax(kjit_runtime *rt, int dtype, float *weights, int *ids, const void *logits,
                      int tokens, int experts, int top_k, int renormalize, void *stream);
/* The same with a kjit_moe_scoring, an optional bias (`experts` floats; NULL: none), grouped
 * top-k (`groups` equal groups, the best `top_groups` of them searched) and a scale on the
 * weights: kjit::ops::moe_topk with its TopkOptions. */
int kjit_moe_topk(kjit_runtime *rt, int dtype, float *weights, int *ids, const void *logits,
                  const float *bias, int tokens, int experts, int top_k, int scoring, int groups,
                  int top_groups, int renormalize, float scale, void *stream);
/* The device workspace kjit_fused_moe needs, in bytes, into *bytes (0 on failure). */
int kjit_fused_moe_workspace_bytes(int dtype, int tokens, int top_k, int experts, int hidden,
                                   int inter, size_t *bytes);
/* out [tokens, hidden] = the weighted sum over each token's top_k experts of
 * w2[e] @ (silu(gate) * up), gate and up from w13[e] @ x[t]: x [tokens, hidden], weights (float)
 * and ids (int32) [tokens, top_k], w13 [experts, 2 * inter, hidden], w2 [experts, hidden, inter];
 * `workspace` 256-byte aligned device memory of kjit_fused_moe_workspace_bytes. An id of -1 routes
 * its slot nowhere (it contributes zero); any other id outside [0, experts) is the caller's error,
 * routed nowhere likewise (kjit_fused_moe_ex refuses it on request). FLOAT16 and BFLOAT16 on
 * sm_90a (wgmma), gfx942 and gfx950 (MFMA). */
int kjit_fused_moe(kjit_runtime *rt, int dtype, void *out, const void *x, const float *weights,
                   const int *ids, int tokens, int top_k, const void *w13, const void *w2,
                   int experts, int hidden, int inter, void *workspace, size_t workspace_bytes,
                   void *stream);

/* ---- paged attention and the KV-cache write (kjit/ops/paged_attention.hpp; since 1.3) ---- */

/* How the paged cache holds its elements: of the operator's dtype, or e4m3fn bytes whose value is
 * the decoded byte times the cache's scale (k_scale for k_cache, v_scale for v_cache). */
typedef enum kjit_kv_format { KJIT_KV_MODEL = 0, KJIT_KV_FP8_E4M3 = 1 } kjit_kv_format;

/* The device workspace kjit_paged_attention_decode uses for this shape on the runtime's default
 * device, in bytes, into *bytes (0: it does not split the context; 0 also on failure). The cache
 * is described as for kjit_paged_attention_decode; this compiles the decode kernel (or finds it)
 * to learn its registers, as the call does. */
int kjit_paged_attention_workspace_bytes(kjit_runtime *rt, int q_heads, int num_blocks,
                                         int page_size, int kv_heads, int head_dim, int kv_format,
                                         int batch, int max_blocks, int max_seq_len, size_t *bytes);
/* Decode over a paged cache: q and out [batch, q_heads, head_dim]; k_cache and v_cache
 * [num_blocks, page_size, kv_heads, head_dim] in `kv_format` (a kjit_kv_format; k_scale and
 * v_scale are read for fp8 only); block_tables int32 [batch, max_blocks], seq_lens int32 [batch];
 * max_seq_len 0: max_blocks * page_size; validate 1 copies the tables to the host and refuses a
 * bad entry by name (it waits for the device). `workspace`: NULL (one split per sequence) or
 * device memory of kjit_paged_attention_workspace_bytes. FLOAT16 and BFLOAT16: the semantics
 * and checks of kjit::ops::paged_attention_decode. */
int kjit_paged_attention_decode(kjit_runtime *rt, int dtype, void *out, const void *q, int q_heads,
                                const void *k_cache, const void *v_cache, int num_blocks,
                                int page_size, int kv_heads, int head_dim, int kv_format,
                                float k_scale, float v_scale, const int *block_tables,
                                const int *seq_lens, int batch, int max_blocks, int max_seq_len,
                                int validate, float scale, void *workspace, size_t workspace_bytes,
                                void *stream);
/* Writes key and value [tokens, kv_heads, head_dim] (rows key_stride and value_stride elements
 * apart; 0: kv_heads * head_dim) into the cache at slot_mapping int64 [tokens] (a negative slot
 * skips its token). With `positions` (int64 [tokens]; NULL: none), RoPE is applied to each key
 * first from cos_sin_cache [max_position, rotary_dim] of dtype, rotary_style 0 neox or 1 gptj.
 * FLOAT16 and BFLOAT16: kjit::ops::reshape_and_cache. */
int kjit_reshape_and_cache(kjit_runtime *rt, int dtype, const void *key, const void *value,
                           void *k_cache, void *v_cache, int num_blocks, int page_size,
                           int kv_heads, int head_dim, int kv_format, float k_scale, float v_scale,
                           const int64_t *slot_mapping, int tokens, int64_t key_stride,
                           int64_t value_stride, const int64_t *positions,
                           const void *cos_sin_cache, int max_position, int rotary_dim,
                           int rotary_style, void *stream);

/* ---- FP8 GEMM (kjit/ops/gemm_fp8.hpp, sm_90a; since 1.3) --------------------------------- */

/* d bfloat16 [m, n] = (a x scale_a) @ (b x scale_b)^T: a e4m3 [m, k] and b e4m3 [n, k] row-major
 * (b as nn.Linear holds its weight), float scales row-major of the shape given. _scaled: per
 * tensor (both [1, 1]) or row-wise (scale_a [m, 1], scale_b [1, n]), torch._scaled_mm's forms;
 * _blockscale: scale_a [m, k / 128], scale_b [ceil(n / 128), k / 128] (DeepSeek-V3's). */
int kjit_gemm_fp8_scaled(kjit_runtime *rt, void *d, const uint8_t *a, const float *scale_a,
                         int64_t scale_a_rows, int64_t scale_a_columns, const uint8_t *b,
                         const float *scale_b, int64_t scale_b_rows, int64_t scale_b_columns, int m,
                         int n, int k, void *stream);
int kjit_gemm_fp8_blockscale(kjit_runtime *rt, void *d, const uint8_t *a, const float *scale_a,
                             int64_t scale_a_rows, int64_t scale_a_columns, const uint8_t *b,
                             const float *scale_b, int64_t scale_b_rows, int64_t scale_b_columns,
                             int m, int n, int k, void *stream);

/* The fp8 e4m3 encodings: OCP e4m3fn (bias 7, largest 448; torch.float8_e4m3fn) and e4m3fnuz
 * (bias 8, largest 240, 0x80 its only NaN; torch.float8_e4m3fnuz). The same byte means another
 * value in the other encoding. */
typedef enum kjit_fp8_encoding { KJIT_FP8_E4M3FN = 0, KJIT_FP8_E4M3FNUZ = 1 } kjit_fp8_encoding;
/* The encoding kjit_gemm_fp8_scaled and _blockscale read a and b in on the runtime's default
 * device, into *encoding (a kjit_fp8_encoding; -1 on failure): e4m3fnuz on gfx942 (MI300's matrix
 * cores), e4m3fn elsewhere (kjit::ops::gemm_fp8_encoding; since 1.4). */
int kjit_gemm_fp8_encoding(kjit_runtime *rt, int *encoding);

/* ---- mixture of experts with FP8 weights (kjit/ops/moe.hpp, sm_90a; since 1.4) ------------ */

/* kjit_fused_moe_workspace_bytes for kjit_fused_moe_fp8. */
int kjit_fused_moe_fp8_workspace_bytes(int dtype, int tokens, int top_k, int experts, int hidden,
                                       int inter, size_t *bytes);
/* kjit_fused_moe with e4m3fn weights and DeepSeek-V3's float block scales, one per 128 x 128 block
 * of each expert's matrix: w13 [experts, 2 * inter, hidden] with w13_scales [experts,
 * ceil(2 * inter / 128), hidden / 128] and w2 [experts, hidden, inter] with w2_scales [experts,
 * ceil(hidden / 128), inter / 128], each scale tensor's shape as the caller holds it (checked);
 * weight (e, r, c) is its byte's value times scales[e, r / 128, c / 128]. Each GEMM's activations
 * are quantised to e4m3 per 1 x 128 block of a row on the way. x and out FLOAT16 or BFLOAT16;
 * hidden and inter multiples of 128; `workspace` of kjit_fused_moe_fp8_workspace_bytes. */
int kjit_fused_moe_fp8(kjit_runtime *rt, int dtype, void *out, const void *x, const float *weights,
                       const int *ids, int tokens, int top_k, const uint8_t *w13,
                       const float *w13_scales, int w13_scales_experts, int w13_scales_rows,
                       int w13_scales_columns, const uint8_t *w2, const float *w2_scales,
                       int w2_scales_experts, int w2_scales_rows, int w2_scales_columns,
                       int experts, int hidden, int inter, void *workspace, size_t workspace_bytes,
                       void *stream);

/* ---- mixture of experts: moe_align, fused_moe's options (kjit/ops/moe.hpp; since 1.5) -------- */

/* The most rows kjit_moe_align can fill for `pairs` pairs over `experts` experts in tiles of
 * block_m rows (every expert's run rounded up to block_m), into *rows (0 on failure): the length
 * of sorted_pairs; rows / block_m is that of block_experts. pairs >= 0, experts >= 1, block_m 16,
 * 32, 64 or 128 (kjit::ops::moe_align_rows). */
int kjit_moe_align_rows(int pairs, int experts, int block_m, size_t *rows);
/* The token-expert pairs sorted by expert for a grouped GEMM of block_m-row tiles, as
 * kjit_fused_moe sorts them (kjit::ops::moe_align): pair p = token * top_k + slot routes to ids[p]
 * (int32 [pairs]). Into int32 device arrays: sorted_pairs [kjit_moe_align_rows] each row's pair,
 * -1 for padding, an expert's pairs in pair order (a stable sort), its run padded to a multiple of
 * block_m rows, experts without pairs taking none; block_experts [rows / block_m] the expert of
 * each tile; pair_positions [pairs] each pair's row, -1 for an id outside [0, experts) (routed
 * nowhere: a device cannot refuse it); totals [2] the tiles used and the count of ids out of range.
 * Rows past totals[0] * block_m and tiles past totals[0] are not written. experts in [1, 256],
 * block_m 16, 32, 64 or 128; every vendor. */
int kjit_moe_align(kjit_runtime *rt, int *sorted_pairs, int *block_experts, int *pair_positions,
                   int *totals, const int *ids, int pairs, int experts, int block_m, void *stream);
/* kjit_fused_moe and kjit_fused_moe_fp8 with fused_moe's options (kjit::ops::FusedMoeOptions):
 * validate 1 waits for the device, copies the ids to the host and fails with KJIT_BAD_ARGUMENT
 * naming the first id outside [0, experts) other than -1 (its token and slot) before anything is
 * launched; it cannot run in a CUDA-graph capture. validate 0 is the call without _ex: such an id
 * routes its slot nowhere, as -1 does. Any other value of validate is KJIT_BAD_ARGUMENT. */
int kjit_fused_moe_ex(kjit_runtime *rt, int dtype, void *out, const void *x, const float *weights,
                      const int *ids, int tokens, int top_k, const void *w13, const void *w2,
                      int experts, int hidden, int inter, void *workspace, size_t workspace_bytes,
                      int validate, void *stream);
int kjit_fused_moe_fp8_ex(kjit_runtime *rt, int dtype, void *out, const void *x,
                          const float *weights, const int *ids, int tokens, int top_k,
                          const uint8_t *w13, const float *w13_scales, int w13_scales_experts,
                          int w13_scales_rows, int w13_scales_columns, const uint8_t *w2,
                          const float *w2_scales, int w2_scales_experts, int w2_scales_rows,
                          int w2_scales_columns, int experts, int hidden, int inter,
                          void *workspace, size_t workspace_bytes, int validate, void *stream);

/* ---- operators from one block of memory (since 1.1) --------------------------------------- */

typedef struct kjit_op kjit_op;

/* The operator `name` ("rms_norm" for kjit_rms_norm, "activation_and_mul"...), bound to `runtime`,
 * for kjit_op_launch_packed; it lives as long as the runtime. KJIT_BAD_ARGUMENT names the known
 * ones. */
int kjit_op_get(kjit_runtime *runtime, const char *name, const kjit_op **out);
/* Calls the operator with its arguments packed as kjit_kernel_launch_packed takes a kernel's, so
 * that one packing serves both (the Python package's kjit._fastlaunch): a kjit_launch_config at
 * offset 0, of which only `stream` is read, then the operator function's arguments between the
 * runtime and the stream, argument i in the low bytes of the 8-byte slot at 40 + 8 * i. */
int kjit_op_launch_packed(const kjit_op *op, const void *packed);

/* ---- the cache, tuning and prebuilding (since 1.1) ---------------------------------------- */

/* Each runs in this process what the `kjit` command runs for the same request and sets *json to
 * the JSON document the command prints with --json (README.md, "The command line"): a string the
 * caller frees with kjit_free; NULL when the call fails. A NULL string argument takes the
 * command's default. The tiers are the KJIT_* variables' (KJIT_CACHE_DIR...), read at the call. */
void kjit_free(char *text);
int kjit_cache_stats(char **json);
/* The entries of both tiers; only those for `target`, and of `template_name`, where given. */
int kjit_cache_ls(const char *target, const char *template_name, char **json);
/* Checks every entry and header manifest: {"checked": N, "bad": [...], "manifests_checked": M}.
   Bad entries are no failure of the call. */
int kjit_cache_verify(char **json);
/* Removes least recently used entries of the user tier: down to `max_size` ("2G") and those
 * unused for `older_than` ("7d"). */
int kjit_cache_prune(const char *max_size, const char *older_than, char **json);
int kjit_cache_clear(char **json);
/* Tunes the operator `op` (rms_norm, softmax, silu_and_mul) at the shapes of the JSON file
 * `shapes_file` on the runtime's default GPU, for at most `budget_s` seconds a shape (<= 0: the
 * command's 60), over `space`'s "NAME=V1,V2" items where given. KJIT_NO_DEVICE without a GPU. */
int kjit_tune(const char *op, const char *shapes_file, double budget_s, const char *const *space,
              size_t space_count, char **json);
/* Compiles the built-in sets of `level` ("1"...; NULL: PREBUILD_KERNELS, else 1), or the set files
 * `sets`, for `targets` ("gfx90a;sm_90"; NULL: GPU_ARCHS) into the prebuilt tier `out` (NULL:
 * KJIT_PREBUILT_DIR's). `jobs` compile at once (0: MAX_JOBS, else the cores and free memory),
 * each in a worker process running the `kjit` command `worker`; with `worker` NULL one job
 * builds in this process. Variants that fail to compile are no failure of the call: the
 * document's "failed" and "failures" list them. */
int kjit_prebuild(const char *targets, const char *level, const char *const *sets, size_t set_count,
                  const char *out, int jobs, const char *worker, char **json);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_C_H */
