/* kjit's C ABI from C (compiled as C11, no C++ in this file): versions, a template, a compile
 * and its hit, and each kind of failure as a status with its message. Exit 0 passed, 1 a check
 * failed, 77 skipped (no compiler for the target). Usage: kjit_c_abi_test TARGET */
#include "kjit/c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(condition)                                                                           \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__,            \
              #condition, kjit_last_error());                                                      \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

static const char *source = "template <typename T, int N> __global__ void scale(T* x, float a) {\n"
                            "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "  if (i < N) x[i] = kjit::from_float<T>(kjit::to_float(x[i]) * a);\n"
                            "}\n";

/* kjit_fused_moe_fp8 on 3 tokens of top 2 over 4 experts, inter 128, with what the checks vary:
 * w13_scales [w13_scales_experts, 2, 1], w2_scales [4, 1, w2_scales_columns], hidden and the
 * workspace's size. The tensors lie in `memory` (4096 bytes, 256-byte aligned), never read: every
 * call is refused before the device. */
static int fp8_layer(kjit_runtime *rt, unsigned char *memory, int dtype, int w13_scales_experts,
                     int w2_scales_columns, int hidden, size_t workspace_bytes) {
  static const float weights[6], scales[8];
  static const int ids[6];
  return kjit_fused_moe_fp8(rt, dtype, memory, memory + 1024, weights, ids, 3, 2, memory + 2048,
                            scales, w13_scales_experts, 2, 1, memory + 2560, scales, 4, 1,
                            w2_scales_columns, 4, hidden, 128, memory + 3072, workspace_bytes,
                            NULL);
}

int main(int argc, char **argv) {
  const char *target = argc > 1 ? argv[1] : "gfx90a";
  CHECK(kjit_abi_version() == KJIT_C_ABI_VERSION);
  CHECK(kjit_abi_minor() == KJIT_C_ABI_MINOR);
  CHECK(strcmp(kjit_status_name(KJIT_BAD_PARAMETER), "bad parameter") == 0);
  CHECK(strcmp(kjit_status_name(12345), "unknown") == 0);

  static const char *const types[] = {"float", "half", "bfloat16"};
  kjit_param_decl decls[2];
  memset(decls, 0, sizeof decls);
  decls[0].name = "T";
  decls[0].kind = KJIT_PARAM_TYPE;
  decls[0].types = types;
  decls[0].type_count = 3;
  decls[1].name = "N";
  decls[1].kind = KJIT_PARAM_INTEGER;
  decls[1].min = 1;
  decls[1].max = 1 << 20;
  static const char *const arguments[] = {"T*", "float"};

  kjit_template *tmpl = NULL;
  CHECK(kjit_template_create("c_abi_scale", source, decls, 2, arguments, 2, "scale", &tmpl) ==
        KJIT_OK);
  if (!tmpl)
    return 1;
  CHECK(strcmp(kjit_template_name(tmpl), "c_abi_scale") == 0);

  /* A built-in template by name, and an unknown name. */
  kjit_template *builtin = NULL;
  CHECK(kjit_template_builtin("rms_norm", &builtin) == KJIT_OK && builtin != NULL);
  kjit_template_destroy(builtin);
  CHECK(kjit_template_builtin("no_such_template", &builtin) == KJIT_UNKNOWN_TEMPLATE);
  CHECK(strstr(kjit_last_error(), "no_such_template") != NULL);

  /* A malformed schema: min > max. */
  kjit_template *bad = NULL;
  decls[1].min = 10;
  decls[1].max = 1;
  CHECK(kjit_template_create("bad", source, decls, 2, arguments, 2, NULL, &bad) ==
        KJIT_BAD_PARAMETER);
  CHECK(bad == NULL && strlen(kjit_last_error()) > 0);
  /* A null pointer is an error, not a crash. */
  CHECK(kjit_template_create(NULL, source, decls, 2, arguments, 2, NULL, &bad) ==
        KJIT_BAD_ARGUMENT);

  kjit_runtime *rt = NULL;
  CHECK(kjit_runtime_create(&rt) == KJIT_OK);
  if (!rt)
    return 1;

  kjit_param params[2] = {{"T", "half", 0}, {"N", NULL, 4096}};
  const kjit_code *code = NULL;
  int status = kjit_compile(rt, tmpl, params, 2, target, &code);
  if (status == KJIT_COMPILER_UNAVAILABLE || status == KJIT_UNSUPPORTED_TARGET) {
    printf("skipped: no compiler for %s: %s\n", target, kjit_last_error());
    kjit_runtime_destroy(rt);
    kjit_template_destroy(tmpl);
    return 77;
  }
  CHECK(status == KJIT_OK);
  if (code) {
    const void *bytes = NULL;
    size_t size = 0;
    kjit_code_bytes(code, &bytes, &size);
    CHECK(bytes != NULL && size > 0);
    CHECK(strlen(kjit_code_key(code)) == 64);
    CHECK(strlen(kjit_code_lowered_name(code)) > 0);
    CHECK(strstr(kjit_code_expression(code), "4096") != NULL);
    CHECK(kjit_code_compile_ms(code) >= 0);
    printf("compiled %s for %s: %zu bytes, origin %s, key %.12s\n", kjit_code_expression(code),
           kjit_code_target(code), size, kjit_code_origin(code), kjit_code_key(code));
    /* The same variant again: the same handle, from memory. */
    const kjit_code *again = NULL;
    CHECK(kjit_compile(rt, tmpl, params, 2, target, &again) == KJIT_OK && again == code);
  }

  /* A missing parameter, an out-of-range one, a bad target. */
  CHECK(kjit_compile(rt, tmpl, params, 1, target, &code) == KJIT_BAD_PARAMETER);
  CHECK(strstr(kjit_last_error(), "N") != NULL);
  kjit_param too_big[2] = {{"T", "half", 0}, {"N", NULL, 1 << 21}};
  CHECK(kjit_compile(rt, tmpl, too_big, 2, target, &code) == KJIT_BAD_PARAMETER);
  CHECK(kjit_compile(rt, tmpl, params, 2, "not-a-target", &code) == KJIT_BAD_TARGET);

  /* A compile error carries the compiler's log in the detail. */
  kjit_template *broken = NULL;
  decls[1].min = 1;
  decls[1].max = 8;
  CHECK(kjit_template_create("c_abi_broken",
                             "template <int N> __global__ void broken(float* x) {\n"
                             "  x[0] = undeclared_name;\n}\n",
                             &decls[1], 1, NULL, 0, "broken", &broken) == KJIT_OK);
  if (broken) {
    kjit_param one = {"N", NULL, 1};
    CHECK(kjit_compile(rt, broken, &one, 1, target, &code) == KJIT_COMPILE_ERROR);
    CHECK(strstr(kjit_last_error_detail(), "undeclared_name") != NULL);
    kjit_template_destroy(broken);
  }

  /* A launch with the wrong argument count is refused before the driver (checked on the GPU;
   * here there may be no device, which is its own clear status). */
  const kjit_kernel *kernel = NULL;
  status = kjit_kernel_get(rt, tmpl, params, 2, -1, &kernel);
  CHECK(status == KJIT_OK || status == KJIT_NO_DEVICE);
  if (status == KJIT_OK) {
    kjit_launch_config config = {{1, 1, 1}, {256, 1, 1}, 0, 0, NULL};
    float a = 2.0f;
    void *args[1] = {&a};
    uint32_t sizes[1] = {4};
    CHECK(kjit_kernel_launch(kernel, &config, args, sizes, 1) == KJIT_BAD_ARGUMENT);
    CHECK(kjit_kernel_arg_count(kernel) == 2 && kjit_kernel_arg_size(kernel, 1) == 4);
    CHECK(strcmp(kjit_kernel_backend(kernel), "HIP") == 0 ||
          strcmp(kjit_kernel_backend(kernel), "CUDA") == 0);
  } else {
    printf("no GPU: %s\n", kjit_last_error());
  }

  /* An operator called from a packed block reads each argument from its slot: the operator's own
   * checks, which run before it needs a GPU, report the values packed (hidden 0, then eps -1). */
  const kjit_op *op = NULL;
  CHECK(kjit_op_get(rt, "no_such_op", &op) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "rms_norm") != NULL);
  CHECK(kjit_op_get(rt, "rms_norm", &op) == KJIT_OK && op != NULL);
  const kjit_op *again = NULL;
  CHECK(kjit_op_get(rt, "rms_norm", &again) == KJIT_OK && again == op);
  /* rms_norm(dtype, out, x, weight, eps, rows, hidden) after the 40-byte launch config. */
  unsigned char packed[40 + 7 * 8];
  memset(packed, 0, sizeof packed);
  int dtype = KJIT_BFLOAT16, rows = 1, hidden = 0;
  void *pointer = packed; /* any non-null address: the checks fail before it is used */
  float eps = 1e-6f;
  memcpy(packed + 40, &dtype, sizeof dtype);
  for (int i = 1; i <= 3; ++i)
    memcpy(packed + 40 + 8 * i, &pointer, sizeof pointer);
  memcpy(packed + 40 + 8 * 4, &eps, sizeof eps);
  memcpy(packed + 40 + 8 * 5, &rows, sizeof rows);
  memcpy(packed + 40 + 8 * 6, &hidden, sizeof hidden);
  CHECK(kjit_op_launch_packed(op, packed) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "hidden is 0") != NULL);
  hidden = 4096;
  eps = -1.0f;
  memcpy(packed + 40 + 8 * 4, &eps, sizeof eps);
  memcpy(packed + 40 + 8 * 6, &hidden, sizeof hidden);
  CHECK(kjit_op_launch_packed(op, packed) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "eps is -1") != NULL);
  CHECK(kjit_op_launch_packed(NULL, packed) == KJIT_BAD_ARGUMENT);

  /* Attention and mixture of experts (since 1.2): the C++ operators' argument errors, checked
   * before a GPU is needed, reach C as the status and the message. */
  static _Alignas(256) unsigned char memory[4096]; /* distinct aligned addresses, never read */
  void *out = memory, *x = memory + 1024, *matrix = memory + 2048, *workspace = memory + 3072;
  const int cu_seqlens[3] = {0, 3, 5};
  CHECK(kjit_flash_attention(rt, KJIT_BFLOAT16, out, x, matrix, matrix, cu_seqlens, cu_seqlens, 2,
                             5, 5, 3, 4, 2, 32, 1, 0.125f, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "head_dim 32 is not supported") != NULL);
  CHECK(kjit_flash_attention(rt, KJIT_FLOAT32, out, x, matrix, matrix, cu_seqlens, cu_seqlens, 2, 5,
                             5, 3, 4, 2, 64, 1, 0.125f, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "flash_attention computes in float16 and bfloat16") != NULL);
  float weights[6];
  int ids[6];
  CHECK(kjit_topk_softmax(rt, KJIT_FLOAT32, weights, ids, x, 3, 8, 33, 1, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "top_k") != NULL);
  CHECK(kjit_moe_topk(rt, KJIT_FLOAT32, weights, ids, x, NULL, 3, 8, 2, 2, 1, 1, 1, 1.0f, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "scoring 2 is neither") != NULL);
  CHECK(kjit_moe_topk(rt, KJIT_FLOAT32, weights, ids, x, NULL, 3, 8, 2, KJIT_MOE_SIGMOID, 3, 1, 1,
                      1.0f, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "groups") != NULL);
  size_t bytes = 0;
  CHECK(kjit_fused_moe_workspace_bytes(KJIT_BFLOAT16, 3, 2, 4, 64, 32, &bytes) == KJIT_OK &&
        bytes > 0);
  size_t refused = 1;
  CHECK(kjit_fused_moe_workspace_bytes(KJIT_BFLOAT16, -1, 2, 4, 64, 32, &refused) ==
            KJIT_BAD_ARGUMENT &&
        refused == 0);
  CHECK(strstr(kjit_last_error(), "tokens -1") != NULL);
  CHECK(kjit_fused_moe_workspace_bytes(KJIT_FLOAT32, 3, 2, 4, 64, 32, &refused) ==
        KJIT_BAD_ARGUMENT);
  CHECK(kjit_fused_moe(rt, KJIT_BFLOAT16, out, x, weights, ids, 3, 2, matrix, matrix, 4, 64, 32,
                       workspace, bytes - 1, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "the workspace holds") != NULL);
  CHECK(kjit_fused_moe(rt, KJIT_BFLOAT16, out, x, weights, ids, 3, 2, matrix, matrix, 4, 64, 32,
                       memory + 3072 + 16, bytes, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "workspace is not 256-byte aligned") != NULL);
  static const char *const added_ops[] = {"flash_attention", "topk_softmax", "moe_topk",
                                          "fused_moe"};
  for (size_t i = 0; i < sizeof added_ops / sizeof *added_ops; ++i)
    CHECK(kjit_op_get(rt, added_ops[i], &op) == KJIT_OK && op != NULL);

  /* Paged attention, the KV-cache write and the FP8 GEMMs (since 1.3): likewise. */
  const int tables[2] = {0, 1}, lens[2] = {3, 5};
  CHECK(kjit_paged_attention_decode(rt, KJIT_BFLOAT16, out, x, 4, matrix, matrix, 2, 16, 2, 32,
                                    KJIT_KV_MODEL, 1.0f, 1.0f, tables, lens, 2, 1, 0, 0, 0.125f,
                                    NULL, 0, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "head_dim 32 is not supported") != NULL);
  CHECK(kjit_paged_attention_decode(rt, KJIT_BFLOAT16, out, x, 3, matrix, matrix, 2, 16, 2, 64,
                                    KJIT_KV_FP8_E4M3, 1.0f, 1.0f, tables, lens, 2, 1, 0, 0, 0.125f,
                                    NULL, 0, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "q_heads 3 is not a multiple of kv_heads 2") != NULL);
  CHECK(kjit_paged_attention_decode(rt, KJIT_FLOAT16, out, x, 4, matrix, matrix, 2, 16, 2, 64, 2,
                                    1.0f, 1.0f, tables, lens, 2, 1, 0, 0, 0.125f, NULL, 0,
                                    NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "kv_format 2 is neither") != NULL);
  CHECK(kjit_paged_attention_decode(rt, KJIT_FLOAT32, out, x, 4, matrix, matrix, 2, 16, 2, 64,
                                    KJIT_KV_MODEL, 1.0f, 1.0f, tables, lens, 2, 1, 0, 0, 0.125f,
                                    NULL, 0, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "paged_attention_decode computes in float16 and bfloat16") !=
        NULL);
  bytes = 1;
  CHECK(kjit_paged_attention_workspace_bytes(rt, 4, 2, 24, 2, 64, KJIT_KV_MODEL, 2, 1, 0, &bytes) ==
            KJIT_BAD_ARGUMENT &&
        bytes == 0);
  CHECK(strstr(kjit_last_error(), "page_size 24 is not supported") != NULL);
  const int64_t slots[2] = {0, 1};
  CHECK(kjit_reshape_and_cache(rt, KJIT_BFLOAT16, x, x, matrix, matrix, 2, 16, 2, 12, KJIT_KV_MODEL,
                               1.0f, 1.0f, slots, 2, 0, 0, NULL, NULL, 0, 0, 0,
                               NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "head_dim 12 is not supported") != NULL);
  CHECK(kjit_reshape_and_cache(rt, KJIT_BFLOAT16, x, x, matrix, matrix, 2, 16, 2, 64,
                               KJIT_KV_FP8_E4M3, 0.0f, 1.0f, slots, 2, 0, 0, NULL, NULL, 0, 0, 0,
                               NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "k_scale and v_scale must be positive") != NULL);
  CHECK(kjit_reshape_and_cache(rt, KJIT_BFLOAT16, x, x, matrix, matrix, 2, 16, 2, 64, KJIT_KV_MODEL,
                               1.0f, 1.0f, slots, 2, 0, 0, slots, matrix, 8, 64, 2,
                               NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "rotary style 2 is neither") != NULL);
  CHECK(kjit_reshape_and_cache(rt, KJIT_BFLOAT16, x, x, matrix, matrix, 2, 16, 2, 64, KJIT_KV_MODEL,
                               1.0f, 1.0f, slots, 2, 0, 0, slots, matrix, 8, 66, 0,
                               NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "rotary_dim 66 must be even and in [2, head_dim = 64]") != NULL);
  const float scales[2] = {1.0f, 1.0f};
  const uint8_t *a8 = memory + 1024, *b8 = memory + 2048;
  CHECK(kjit_gemm_fp8_scaled(rt, out, a8, scales, 1, 1, b8, scales, 1, 1, 4, 16, 24, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "k = 24 is not a multiple of 16") != NULL);
  CHECK(kjit_gemm_fp8_scaled(rt, out, a8, scales, 4, 1, b8, scales, 1, 1, 4, 16, 32, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "scale_b is") != NULL);
  CHECK(kjit_gemm_fp8_blockscale(rt, out, a8, scales, 4, 1, b8, scales, 1, 2, 4, 16, 128, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "scale_b is") != NULL);
  CHECK(kjit_gemm_fp8_blockscale(rt, out, a8, scales, 4, 1, b8, scales, 1, 1, 4, 16, 64, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "(the scale block)") != NULL);
  static const char *const added_1_3[] = {"paged_attention_decode", "reshape_and_cache",
                                          "gemm_fp8_scaled", "gemm_fp8_blockscale"};
  for (size_t i = 0; i < sizeof added_1_3 / sizeof *added_1_3; ++i)
    CHECK(kjit_op_get(rt, added_1_3[i], &op) == KJIT_OK && op != NULL);
  /* reshape_and_cache from a packed block: its int64 key_stride and value_stride (slots 14 and
   * 15 of 21) are read as 8-byte values; a stride below a row (2 * 64) is refused by value. */
  CHECK(kjit_op_get(rt, "reshape_and_cache", &op) == KJIT_OK);
  unsigned char packed_cache[40 + 21 * 8];
  memset(packed_cache, 0, sizeof packed_cache);
  const int dtype_slot = KJIT_BFLOAT16, tokens = 2;
  const int sizes[5] = {2, 16, 2, 64, KJIT_KV_MODEL}; /* num_blocks ... kv_format: slots 5-9 */
  void *const pointers[4] = {x, x, matrix, matrix};   /* key, value, k_cache, v_cache: 1-4 */
  const float one = 1.0f;
  const int64_t *slot_pointer = slots;
  const int64_t key_stride = 100, value_stride = (int64_t)1 << 33; /* past an int's range */
  memcpy(packed_cache + 40, &dtype_slot, sizeof dtype_slot);
  for (int i = 0; i < 4; ++i)
    memcpy(packed_cache + 40 + 8 * (1 + i), &pointers[i], sizeof(void *));
  for (int i = 0; i < 5; ++i)
    memcpy(packed_cache + 40 + 8 * (5 + i), &sizes[i], sizeof(int));
  memcpy(packed_cache + 40 + 8 * 10, &one, sizeof one);
  memcpy(packed_cache + 40 + 8 * 11, &one, sizeof one);
  memcpy(packed_cache + 40 + 8 * 12, &slot_pointer, sizeof slot_pointer);
  memcpy(packed_cache + 40 + 8 * 13, &tokens, sizeof tokens);
  memcpy(packed_cache + 40 + 8 * 14, &key_stride, sizeof key_stride);
  memcpy(packed_cache + 40 + 8 * 15, &value_stride, sizeof value_stride);
  CHECK(kjit_op_launch_packed(op, packed_cache) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "key_stride 100 and value_stride 8589934592") != NULL);

  /* The FP8 mixture of experts and the GEMMs' fp8 encoding (since 1.4): the arguments reach the
   * C++ checks in their places (each scale tensor named by its own shape), before a GPU is needed.
   * hidden = inter = 128: w13_scales [4, 2, 1], w2_scales [4, 1, 1]. */
  size_t fp8_bytes = 0;
  CHECK(kjit_fused_moe_fp8_workspace_bytes(KJIT_BFLOAT16, 3, 2, 4, 128, 128, &fp8_bytes) ==
            KJIT_OK &&
        fp8_bytes > 0);
  CHECK(kjit_fused_moe_workspace_bytes(KJIT_BFLOAT16, 3, 2, 4, 128, 128, &bytes) == KJIT_OK &&
        bytes != fp8_bytes); /* the FP8 layer keeps e4m3 activations and their scales */
  refused = 1;
  CHECK(kjit_fused_moe_fp8_workspace_bytes(KJIT_BFLOAT16, -1, 2, 4, 128, 128, &refused) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "fused_moe_fp8_workspace_bytes: tokens -1") != NULL);
  refused = 1;
  CHECK(kjit_fused_moe_fp8_workspace_bytes(KJIT_FLOAT32, 3, 2, 4, 128, 128, &refused) ==
            KJIT_BAD_ARGUMENT &&
        refused == 0);
  CHECK(fp8_layer(rt, memory, KJIT_BFLOAT16, 4, 1, 192, fp8_bytes) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "hidden is 192, must be a positive multiple of 128") != NULL);
  CHECK(fp8_layer(rt, memory, KJIT_BFLOAT16, 3, 1, 128, fp8_bytes) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "w13_scales is [3, 2, 1], must be [4, 2, 1]") != NULL);
  CHECK(fp8_layer(rt, memory, KJIT_FLOAT16, 4, 2, 128, fp8_bytes) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "w2_scales is [4, 1, 2], must be [4, 1, 1]") != NULL);
  CHECK(fp8_layer(rt, memory, KJIT_BFLOAT16, 4, 1, 128, fp8_bytes - 1) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "the workspace holds") != NULL);
  CHECK(fp8_layer(rt, memory, KJIT_FLOAT32, 4, 1, 128, fp8_bytes) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "fused_moe computes in float16 and bfloat16") != NULL);
  CHECK(kjit_op_get(rt, "fused_moe_fp8", &op) == KJIT_OK && op != NULL);
  int encoding = 7;
  status = kjit_gemm_fp8_encoding(rt, &encoding);
  CHECK((status == KJIT_OK && (encoding == KJIT_FP8_E4M3FN || encoding == KJIT_FP8_E4M3FNUZ)) ||
        (status == KJIT_NO_DEVICE && encoding == -1));
  CHECK(kjit_gemm_fp8_encoding(rt, NULL) == KJIT_BAD_ARGUMENT);

  /* moe_align and fused_moe's options (since 1.5): the rows' bound, the alignment's checks
   * and fused_moe's validate, in their places (from a packed block too), before a GPU is needed. */
  size_t align_rows = 0;
  CHECK(kjit_moe_align_rows(7, 4, 16, &align_rows) == KJIT_OK && align_rows == (1 + 4) * 16);
  CHECK(kjit_moe_align_rows(1, 8, 128, &align_rows) == KJIT_OK &&
        align_rows == 256); /* 1 tile; 2 allowed */
  CHECK(kjit_moe_align_rows(0, 8, 128, &align_rows) == KJIT_OK && align_rows == 0);
  align_rows = 1;
  CHECK(kjit_moe_align_rows(-1, 8, 128, &align_rows) == KJIT_BAD_ARGUMENT && align_rows == 0);
  CHECK(strstr(kjit_last_error(), "moe_align_rows: pairs -1, experts 8, block_m 128") != NULL);
  align_rows = 1;
  CHECK(kjit_moe_align_rows(8, 8, 100, &align_rows) == KJIT_BAD_ARGUMENT && align_rows == 0);
  CHECK(kjit_moe_align_rows(8, 8, 128, NULL) == KJIT_BAD_ARGUMENT);
  int *sorted = (int *)memory, *blocks = (int *)(memory + 1024),
      *positions = (int *)(memory + 2048), *totals = (int *)(memory + 3072);
  CHECK(kjit_moe_align(rt, sorted, blocks, positions, totals, ids, 6, 8, 100, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "kjit::ops::moe_align: block_m is 100, not 16, 32, 64 or 128") !=
        NULL);
  CHECK(kjit_moe_align(rt, sorted, blocks, positions, totals, ids, 6, 257, 128, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "kjit::ops::moe_align: experts is 257, must be in [1, 256]") !=
        NULL);
  CHECK(kjit_moe_align(rt, sorted, blocks, positions, totals, NULL, 6, 8, 128, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "kjit::ops::moe_align: ids is null") != NULL);
  CHECK(kjit_moe_align(rt, sorted, blocks, NULL, totals, ids, 6, 8, 128, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "kjit::ops::moe_align: pair_positions is null") != NULL);
  CHECK(kjit_moe_align(rt, sorted, blocks, positions, totals, ids, -1, 8, 128, NULL) ==
        KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "kjit::ops::moe_align: pairs is -1") != NULL);
  /* moe_align(sorted_pairs, block_experts, pair_positions, totals, ids, pairs, experts, block_m)
   * from a packed block: experts (slot 6), then block_m (slot 7), named by the value packed. */
  CHECK(kjit_op_get(rt, "moe_align", &op) == KJIT_OK && op != NULL);
  unsigned char packed_align[40 + 8 * 8];
  memset(packed_align, 0, sizeof packed_align);
  void *const align_pointers[5] = {sorted, blocks, positions, totals, ids};
  const int align_sizes[3] = {6, 300, 128};
  for (int i = 0; i < 5; ++i)
    memcpy(packed_align + 40 + 8 * i, &align_pointers[i], sizeof(void *));
  for (int i = 0; i < 3; ++i)
    memcpy(packed_align + 40 + 8 * (5 + i), &align_sizes[i], sizeof(int));
  CHECK(kjit_op_launch_packed(op, packed_align) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "experts is 300") != NULL);
  const int align_experts = 8, align_block = 48;
  memcpy(packed_align + 40 + 8 * 6, &align_experts, sizeof(int));
  memcpy(packed_align + 40 + 8 * 7, &align_block, sizeof(int));
  CHECK(kjit_op_launch_packed(op, packed_align) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "block_m is 48") != NULL);

  /* fused_moe's validate: 0 or 1, refused by value before the layer's checks, which 1 still
   * passes through (the ids are read only once every other check has passed). */
  CHECK(kjit_fused_moe_workspace_bytes(KJIT_BFLOAT16, 3, 2, 4, 64, 32, &bytes) == KJIT_OK);
  CHECK(kjit_fused_moe_ex(rt, KJIT_BFLOAT16, out, x, weights, ids, 3, 2, matrix, matrix, 4, 64, 32,
                          workspace, bytes, 2, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "fused_moe: validate 2 is neither 0 nor 1") != NULL);
  CHECK(kjit_fused_moe_ex(rt, KJIT_BFLOAT16, out, x, weights, ids, 3, 2, matrix, matrix, 4, 64, 32,
                          workspace, bytes - 1, 1, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "the workspace holds") != NULL);
  CHECK(kjit_fused_moe_ex(rt, KJIT_BFLOAT16, out, x, weights, ids, 3, 9, matrix, matrix, 4, 64, 32,
                          workspace, bytes, 1, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "top_k is 9, must be in [1, 4]") != NULL);
  CHECK(kjit_fused_moe_fp8_ex(rt, KJIT_BFLOAT16, memory, memory + 1024, weights, ids, 3, 2,
                              memory + 2048, scales, 4, 2, 1, memory + 2560, scales, 4, 1, 1, 4,
                              128, 128, memory + 3072, fp8_bytes, -1, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "fused_moe: validate -1 is neither 0 nor 1") != NULL);
  CHECK(kjit_fused_moe_fp8_ex(rt, KJIT_BFLOAT16, memory, memory + 1024, weights, ids, 3, 2,
                              memory + 2048, scales, 3, 2, 1, memory + 2560, scales, 4, 1, 1, 4,
                              128, 128, memory + 3072, fp8_bytes, 1, NULL) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "w13_scales is [3, 2, 1], must be [4, 2, 1]") != NULL);
  /* From a packed block: validate is the last slot before the stream (14 of 15; 22 of 23). */
  CHECK(kjit_op_get(rt, "fused_moe_ex", &op) == KJIT_OK && op != NULL);
  unsigned char packed_moe[40 + 23 * 8];
  memset(packed_moe, 0, sizeof packed_moe);
  const int bad_validate = 7;
  memcpy(packed_moe + 40 + 8 * 14, &bad_validate, sizeof bad_validate);
  CHECK(kjit_op_launch_packed(op, packed_moe) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "validate 7") != NULL);
  CHECK(kjit_op_get(rt, "fused_moe_fp8_ex", &op) == KJIT_OK && op != NULL);
  memset(packed_moe, 0, sizeof packed_moe);
  memcpy(packed_moe + 40 + 8 * 22, &bad_validate, sizeof bad_validate);
  CHECK(kjit_op_launch_packed(op, packed_moe) == KJIT_BAD_ARGUMENT);
  CHECK(strstr(kjit_last_error(), "validate 7") != NULL);

  /* Valid calls reach the device last. This test holds no device memory, so with a GPU they are
   * not made: tests/python/test_gpu_attention_moe.py runs them on the GPU (tools/gpu-check). */
  int ordinal = -1;
  if (kjit_default_device(rt, &ordinal) == KJIT_OK) {
    printf("skipped on a GPU: valid kjit_moe_align and kjit_fused_moe_ex calls (no device memory "
           "here; tests/python/test_gpu_attention_moe.py runs them)\n");
  } else {
    printf("no GPU: valid kjit_moe_align and kjit_fused_moe_ex calls end at the device: %s\n",
           kjit_last_error());
    CHECK(kjit_moe_align(rt, sorted, blocks, positions, totals, ids, 6, 8, 128, NULL) ==
          KJIT_NO_DEVICE);
    CHECK(kjit_fused_moe_ex(rt, KJIT_BFLOAT16, out, x, weights, ids, 3, 2, matrix, matrix, 4, 64,
                            32, workspace, bytes, 1, NULL) == KJIT_NO_DEVICE);
  }

  /* The cache, tuning and prebuilding: the `kjit` command's --json documents, made in this
   * process (the tiers under KJIT_CACHE_DIR, which ctest sets apart for each target). */
  char *json = NULL;
  CHECK(kjit_cache_stats(&json) == KJIT_OK && json && strstr(json, "\"cache_dir\""));
  kjit_free(json);
  CHECK(kjit_cache_ls(target, "c_abi_scale", &json) == KJIT_OK && json);
  if (json && code)
    CHECK(strstr(json, kjit_code_key(code)) != NULL);
  kjit_free(json);
  CHECK(kjit_cache_ls(NULL, "no_such_template", &json) == KJIT_OK && json &&
        strncmp(json, "[]", 2) == 0);
  kjit_free(json);
  CHECK(kjit_cache_verify(&json) == KJIT_OK && json && strstr(json, "\"bad\": []"));
  kjit_free(json);
  json = (char *)"not set";
  CHECK(kjit_cache_prune(NULL, "soon", &json) == KJIT_BAD_USAGE && json == NULL);
  CHECK(strstr(kjit_last_error(), "--older-than soon") != NULL);
  CHECK(kjit_tune("no_such_op", "shapes.json", 0, NULL, 0, &json) == KJIT_BAD_PARAMETER);
  CHECK(strstr(kjit_last_error(), "no_such_op") != NULL);

  /* A prebuild of one variant from a set file, in this process (no worker command). */
  char sets_path[4096], out_path[4096];
  const char *cache_dir = getenv("KJIT_CACHE_DIR");
  snprintf(sets_path, sizeof sets_path, "%s-sets.json", cache_dir ? cache_dir : "c_abi");
  snprintf(out_path, sizeof out_path, "%s-prebuilt", cache_dir ? cache_dir : "c_abi");
  FILE *sets = fopen(sets_path, "w");
  CHECK(sets != NULL);
  if (sets) {
    fputs("{\"name\": \"c_abi\", \"level\": 3, \"variants\": [{\"template\": \"scale\", "
          "\"params\": {\"T\": \"half\", \"N\": 256}}]}\n",
          sets);
    fclose(sets);
    const char *files[1] = {sets_path};
    CHECK(kjit_prebuild(target, NULL, files, 1, out_path, 0, NULL, &json) == KJIT_OK && json);
    if (json) {
      CHECK(strstr(json, "\"variants\": 1") != NULL);
      CHECK(strstr(json, "\"failed\": []") != NULL);
    }
    kjit_free(json);
    CHECK(kjit_prebuild("not-a-target", NULL, files, 1, out_path, 0, NULL, &json) ==
          KJIT_BAD_TARGET);
    CHECK(json == NULL);

    /* Two batches (two templates) for two jobs, whose worker command cannot start: the error
     * names that command and says how to build without workers. */
    sets = fopen(sets_path, "w");
    CHECK(sets != NULL);
    if (sets) {
      fputs("{\"name\": \"c_abi\", \"level\": 3, \"variants\": ["
            "{\"template\": \"scale\", \"params\": {\"T\": \"half\", \"N\": 512}},"
            "{\"template\": \"axpy\", \"params\": {\"T\": \"half\", \"ITEMS\": 2}}]}\n",
            sets);
      fclose(sets);
      CHECK(kjit_prebuild(target, NULL, files, 1, out_path, 2, "/nonexistent/kjit-worker", &json) ==
            KJIT_PROCESS_ERROR);
      CHECK(strstr(kjit_last_error(), "cannot start a worker process /nonexistent/kjit-worker: ") !=
            NULL);
      CHECK(strstr(kjit_last_error(), "--jobs 1") != NULL);
    }
  }

  kjit_runtime_destroy(rt);
  kjit_template_destroy(tmpl);
  if (failures)
    fprintf(stderr, "%d checks failed\n", failures);
  return failures ? 1 : 0;
}
