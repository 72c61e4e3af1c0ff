// kjit's C ABI (kjit/c.h) over the C++ library: handles around kjit::Runtime, kjit::Template,
// CodeObject and Kernel, and one function per operator. Every entry point runs its body through
// guarded(), which turns any exception into a status and the thread's last error, so nothing
// thrown ever reaches a C or Python caller.
#include "kjit/c.h"

#include "cache_command.hpp"
#include "prebuild_command.hpp"
#include "tune_command.hpp"

#include "kjit/error.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/ops.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// The caller's template, or one of the library's built-in ones (then `owned` is empty).
struct kjit_template {
  std::optional<kjit::Template> owned;
  const kjit::Template *tmpl;
};

struct kjit_code {
  const kjit::CodeObject *code;
  std::string key, target, origin;
};

struct kjit_kernel {
  const kjit::Kernel *kernel;
  std::vector<std::uint32_t> sizes;
  // Where each argument lies in a packed launch: after the kjit_launch_config, each at the next
  // multiple of 8 bytes.
  std::vector<std::uint32_t> offsets;
  std::uint32_t packed_size = sizeof(kjit_launch_config);
};

// An operator function of kjit/c.h bound to a runtime, called from a packed block.
struct kjit_op {
  kjit_runtime *runtime;
  int (*call)(kjit_runtime *, const std::byte *packed);
};

struct kjit_runtime {
  kjit::Runtime runtime;
  // The handles given out, one per code object or kernel, alive as long as the runtime.
  std::mutex mutex;
  std::map<const kjit::CodeObject *, std::unique_ptr<kjit_code>> codes;
  std::map<const kjit::Kernel *, std::unique_ptr<kjit_kernel>> kernels;
  std::map<std::string_view, kjit_op> ops; // keys: packed_ops' names
};

namespace {

struct LastError {
  std::string message, detail;
};
thread_local LastError last_error;

int fail(int status, std::string message, std::string detail = {}) {
  last_error.message = std::move(message);
  last_error.detail = std::move(detail);
  return status;
}

template <typename Body> int guarded(Body &&body) noexcept {
  try {
    body();
    return KJIT_OK;
  } catch (const kjit::Error &error) {
    return fail(static_cast<int>(error.code()) + 1, error.summary(), error.detail());
  } catch (const std::bad_alloc &) {
    return fail(KJIT_INTERNAL, "out of memory");
  } catch (const std::exception &error) {
    return fail(KJIT_INTERNAL, error.what());
  } catch (...) {
    return fail(KJIT_INTERNAL, "an unknown exception");
  }
}

void require(bool condition, const char *what) {
  if (!condition)
    throw kjit::Error(kjit::Errc::bad_argument, std::string(what) + " is null");
}

std::string text(const char *value) { return value ? std::string(value) : std::string(); }

// The one place C parameters become kjit::ParamValues.
kjit::ParamValues to_param_values(const kjit_param *params, std::size_t count) {
  require(params || count == 0, "params");
  kjit::ParamValues values;
  for (std::size_t i = 0; i < count; ++i) {
    require(params[i].name, "a parameter's name");
    if (params[i].type)
      values.add(params[i].name, kjit::Value(std::string(params[i].type)));
    else
      values.add(params[i].name, kjit::Value(params[i].integer));
  }
  return values;
}

kjit::ParamSchema to_schema(const kjit_param_decl &decl) {
  kjit::ParamSchema schema = [&] {
    switch (decl.kind) {
    case KJIT_PARAM_TYPE: {
      require(decl.types || decl.type_count == 0, "a type parameter's types");
      std::optional<std::string> fallback;
      if (decl.default_type)
        fallback = decl.default_type;
      return kjit::ParamSchema::type({decl.types, decl.types + decl.type_count}, fallback);
    }
    case KJIT_PARAM_INTEGER:
    case KJIT_PARAM_ONE_OF: {
      std::optional<std::int64_t> fallback;
      if (decl.has_default_integer)
        fallback = decl.default_integer;
      if (decl.kind == KJIT_PARAM_INTEGER)
        return kjit::ParamSchema::integer(decl.min, decl.max, fallback);
      require(decl.values || decl.value_count == 0, "an integer parameter's values");
      return kjit::ParamSchema::one_of({decl.values, decl.values + decl.value_count}, fallback);
    }
    default:
      throw kjit::Error(kjit::Errc::bad_parameter, "parameter " + text(decl.name) + ": kind " +
                                                       std::to_string(decl.kind) +
                                                       " is none of type, integer, one_of");
    }
  }();
  return decl.tunable ? schema.tunable() : schema;
}

const kjit::Device &device_of(kjit_runtime &rt, int ordinal) {
  if (ordinal < 0)
    return rt.runtime.default_device();
  for (const kjit::Device &device : kjit::devices())
    if (device.ordinal() == ordinal)
      return device;
  throw kjit::Error(kjit::Errc::no_device, "no GPU of ordinal " + std::to_string(ordinal));
}

kjit::LaunchConfig to_launch_config(const kjit_launch_config &config) {
  return {.grid = {config.grid[0], config.grid[1], config.grid[2]},
          .block = {config.block[0], config.block[1], config.block[2]},
          .shared_bytes = config.shared_bytes,
          .stream = config.stream};
}

// Calls `body` with a null pointer of the element type `dtype` names.
template <typename Body> void with_element(int dtype, Body &&body) {
  switch (dtype) {
  case KJIT_FLOAT32:
    return body(static_cast<float *>(nullptr));
  case KJIT_FLOAT16:
    return body(static_cast<kjit::ops::Half *>(nullptr));
  case KJIT_BFLOAT16:
    return body(static_cast<kjit::ops::BFloat16 *>(nullptr));
  default:
    throw kjit::Error(kjit::Errc::bad_argument,
                      "dtype " + std::to_string(dtype) + " is none of float32, float16, bfloat16");
  }
}

// with_element for the operators that compute in 16-bit types only (their kernels use tensor
// cores on half and bfloat16): float32 is refused by name rather than failing to link.
template <typename Body> void with_half_element(int dtype, const char *op, Body &&body) {
  if (dtype == KJIT_FLOAT32)
    throw kjit::Error(kjit::Errc::bad_argument,
                      std::string(op) + " computes in float16 and bfloat16, not float32");
  with_element(dtype, [&]<typename T>(T *) {
    if constexpr (!std::is_same_v<T, float>)
      body(static_cast<T *>(nullptr));
  });
}

kjit::Runtime &runtime_of(kjit_runtime *rt) {
  require(rt, "runtime");
  return rt->runtime;
}

template <typename T> T *as(void *pointer) { return static_cast<T *>(pointer); }
template <typename T> const T *as(const void *pointer) { return static_cast<const T *>(pointer); }

// Sets *json to what `run` writes to the stream it is given (a command's --json document), as a
// string the caller frees with kjit_free.
template <typename Run> void document(char **json, Run &&run) {
  require(json, "json");
  *json = nullptr;
  std::ostringstream out;
  run(out);
  const std::string text = out.str();
  auto *copy = static_cast<char *>(std::malloc(text.size() + 1));
  if (copy == nullptr)
    throw std::bad_alloc();
  std::memcpy(copy, text.c_str(), text.size() + 1);
  *json = copy;
}

// `kjit cache <command> --json` with the options `options` sets (inside the guard: building
// them can throw).
template <typename Options = void (*)(kjit::cli::CacheArgs &)>
int cache_command(
    const char *command, char **json, Options &&options = [](kjit::cli::CacheArgs &) {}) {
  return guarded([&] {
    kjit::cli::CacheArgs args;
    options(args);
    document(json, [&](std::ostream &out) {
      kjit::cli::run_cache_command(command, args, /*as_json=*/true, out);
    });
  });
}

// The paged cache kjit/c.h passes by its parts. The decode only reads it; PagedKvCache holds
// mutable pointers because reshape_and_cache writes through the same description.
kjit::ops::PagedKvCache to_paged_cache(const void *k, const void *v, int num_blocks, int page_size,
                                       int kv_heads, int head_dim, int kv_format, float k_scale,
                                       float v_scale) {
  if (kv_format != KJIT_KV_MODEL && kv_format != KJIT_KV_FP8_E4M3)
    throw kjit::Error(kjit::Errc::bad_argument, "kv_format " + std::to_string(kv_format) +
                                                    " is neither model (0) nor fp8_e4m3 (1)");
  return {.k = const_cast<void *>(k),
          .v = const_cast<void *>(v),
          .num_blocks = num_blocks,
          .page_size = page_size,
          .kv_heads = kv_heads,
          .head_dim = head_dim,
          .format = kv_format == KJIT_KV_FP8_E4M3 ? kjit::ops::KvCacheFormat::fp8_e4m3
                                                  : kjit::ops::KvCacheFormat::model,
          .k_scale = k_scale,
          .v_scale = v_scale};
}

using GemmFp8 = void (*)(kjit::Runtime &, kjit::ops::BFloat16 *, const std::uint8_t *,
                         kjit::ops::ScaleTensor, const std::uint8_t *, kjit::ops::ScaleTensor, int,
                         int, int, kjit::Stream);

// kjit_gemm_fp8_scaled and _blockscale: the scales given with their shapes, as the C++ takes them.
int call_gemm_fp8(GemmFp8 function, kjit_runtime *rt, void *d, const uint8_t *a,
                  const float *scale_a, int64_t scale_a_rows, int64_t scale_a_columns,
                  const uint8_t *b, const float *scale_b, int64_t scale_b_rows,
                  int64_t scale_b_columns, int m, int n, int k, void *stream) {
  return guarded([&] {
    function(runtime_of(rt), as<kjit::ops::BFloat16>(d), a,
             {scale_a, scale_a_rows, scale_a_columns}, b, {scale_b, scale_b_rows, scale_b_columns},
             m, n, k, stream);
  });
}

// kjit_fused_moe_workspace_bytes and its FP8 form (`name`): the sizes checked (fused_moe refuses
// the others itself; the size of a workspace for them would be meaningless), then the workspace of
// the layer `layer_of(T *)` describes for the element type T of `dtype`.
template <typename LayerOf>
int moe_workspace_bytes(const char *name, int dtype, int tokens, int top_k, int experts, int hidden,
                        int inter, size_t *bytes, LayerOf &&layer_of) {
  if (bytes)
    *bytes = 0;
  return guarded([&] {
    require(bytes, "bytes");
    if (tokens < 0 || top_k < 1 || experts < 1 || hidden < 1 || inter < 1)
      throw kjit::Error(kjit::Errc::bad_argument,
                        std::string(name) + ": tokens " + std::to_string(tokens) + ", top_k " +
                            std::to_string(top_k) + ", experts " + std::to_string(experts) +
                            ", hidden " + std::to_string(hidden) + ", inter " +
                            std::to_string(inter) + ": tokens must be >= 0 and the others >= 1");
    with_half_element(dtype, "fused_moe", [&]<typename T>(T *none) {
      *bytes = kjit::ops::fused_moe_workspace_bytes<T>(tokens, top_k, layer_of(none));
    });
  });
}

// kjit_fused_moe, its FP8 form and their _ex forms: kjit::ops::fused_moe on the layer
// `layer_of(T *)` describes for the element type T of `dtype`, with FusedMoeOptions::validate
// from `validate` (0 or 1; the forms without _ex pass 0).
template <typename LayerOf>
int call_fused_moe(kjit_runtime *rt, int dtype, void *out, const void *x, const float *weights,
                   const int *ids, int tokens, int top_k, LayerOf &&layer_of, void *workspace,
                   size_t workspace_bytes, int validate, void *stream) {
  return guarded([&] {
    if (validate != 0 && validate != 1)
      throw kjit::Error(kjit::Errc::bad_argument,
                        "fused_moe: validate " + std::to_string(validate) + " is neither 0 nor 1");
    const kjit::ops::FusedMoeOptions options{.validate = validate == 1};
    with_half_element(dtype, "fused_moe", [&]<typename T>(T *none) {
      kjit::ops::fused_moe(runtime_of(rt), as<T>(out), as<T>(x), weights, ids, tokens, top_k,
                           layer_of(none), workspace, workspace_bytes, stream, options);
    });
  });
}

// The FP8 layer kjit/c.h passes by its parts.
kjit::ops::MoeWeightsFp8 to_fp8_layer(const uint8_t *w13, kjit::ops::MoeScales w13_scales,
                                      const uint8_t *w2, kjit::ops::MoeScales w2_scales,
                                      int experts, int hidden, int inter) {
  return {.w13 = w13,
          .w2 = w2,
          .w13_scales = w13_scales,
          .w2_scales = w2_scales,
          .experts = experts,
          .hidden = hidden,
          .inter = inter};
}

// ---- operators from a packed block (kjit_op_launch_packed) --------------------------------

// Argument i of an operator's packed call: the low bytes of the 8-byte slot at 40 + 8 * i.
template <typename T> T slot(const std::byte *packed, std::size_t index) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  T value;
  std::memcpy(&value, packed + sizeof(kjit_launch_config) + 8 * index, sizeof value);
  return value;
}

template <typename Function> struct PackedCall;
// An operator function kjit_x(kjit_runtime *, Args..., void *stream): Args from the slots, the
// stream from the packed kjit_launch_config.
template <typename... Args> struct PackedCall<int (*)(kjit_runtime *, Args...)> {
  using Arguments = std::tuple<Args...>;
  static constexpr std::size_t count = sizeof...(Args) - 1;
  static_assert(std::is_same_v<std::tuple_element_t<count, Arguments>, void *>,
                "an operator function's last parameter is its stream");

  template <auto function, std::size_t... Index>
  static int call(kjit_runtime *rt, const std::byte *packed, std::index_sequence<Index...>) {
    kjit_launch_config config;
    std::memcpy(&config, packed, sizeof config);
    return function(rt, slot<std::tuple_element_t<Index, Arguments>>(packed, Index)...,
                    config.stream);
  }
};

template <auto function> int packed_call(kjit_runtime *rt, const std::byte *packed) {
  using Call = PackedCall<decltype(function)>;
  return Call::template call<function>(rt, packed, std::make_index_sequence<Call::count>{});
}

struct PackedOp {
  std::string_view name;
  int (*call)(kjit_runtime *, const std::byte *);
};

// Every operator function of kjit/c.h, by the name kjit_op_get takes: one line per operator.
constexpr PackedOp packed_ops[] = {
    {"rms_norm", packed_call<kjit_rms_norm>},
    {"fused_add_rms_norm", packed_call<kjit_fused_add_rms_norm>},
    {"layer_norm", packed_call<kjit_layer_norm>},
    {"softmax", packed_call<kjit_softmax>},
    {"activation", packed_call<kjit_activation>},
    {"activation_and_mul", packed_call<kjit_activation_and_mul>},
    {"rotary_embedding", packed_call<kjit_rotary_embedding>},
    {"quant_int8", packed_call<kjit_quant_int8>},
    {"quant_fp8", packed_call<kjit_quant_fp8>},
    {"gemm", packed_call<kjit_gemm>},
    {"linear", packed_call<kjit_linear>},
    {"flash_attention", packed_call<kjit_flash_attention>},
    {"topk_softmax", packed_call<kjit_topk_softmax>},
    {"moe_topk", packed_call<kjit_moe_topk>},
    {"fused_moe", packed_call<kjit_fused_moe>},
    {"fused_moe_fp8", packed_call<kjit_fused_moe_fp8>},
    {"paged_attention_decode", packed_call<kjit_paged_attention_decode>},
    {"reshape_and_cache", packed_call<kjit_reshape_and_cache>},
    {"gemm_fp8_scaled", packed_call<kjit_gemm_fp8_scaled>},
    {"gemm_fp8_blockscale", packed_call<kjit_gemm_fp8_blockscale>},
    {"moe_align", packed_call<kjit_moe_align>},
    {"fused_moe_ex", packed_call<kjit_fused_moe_ex>},
    {"fused_moe_fp8_ex", packed_call<kjit_fused_moe_fp8_ex>},
};

} // namespace

extern "C" {

uint32_t kjit_abi_version(void) { return KJIT_C_ABI_VERSION; }

const char *kjit_status_name(int status) {
  if (status == KJIT_OK)
    return "ok";
  if (status == KJIT_INTERNAL)
    return "internal";
  if (status < 1 || status > static_cast<int>(kjit::Errc::process_error) + 1)
    return "unknown";
  // Errc's names are string literals: the view's data is NUL-terminated.
  return kjit::to_string(static_cast<kjit::Errc>(status - 1)).data();
}

const char *kjit_last_error(void) { return last_error.message.c_str(); }
const char *kjit_last_error_detail(void) { return last_error.detail.c_str(); }

int kjit_runtime_create(kjit_runtime **out) {
  return guarded([&] {
    require(out, "out");
    *out = new kjit_runtime{};
  });
}

void kjit_runtime_destroy(kjit_runtime *runtime) { delete runtime; }

int kjit_template_create(const char *name, const char *source, const kjit_param_decl *params,
                         size_t param_count, const char *const *arguments, size_t argument_count,
                         const char *kernel, kjit_template **out) {
  return guarded([&] {
    require(out && name && source, "out, name or source");
    require(params || param_count == 0, "params");
    require(arguments || argument_count == 0, "arguments");
    std::vector<kjit::ParamDecl> decls;
    for (std::size_t i = 0; i < param_count; ++i) {
      require(params[i].name, "a parameter's name");
      decls.push_back({params[i].name, to_schema(params[i])});
    }
    kjit::TemplateOptions options{.kernel = text(kernel)};
    for (std::size_t i = 0; i < argument_count; ++i) {
      require(arguments[i], "an argument type");
      options.arguments.emplace_back(arguments[i]);
    }
    auto handle = std::make_unique<kjit_template>();
    handle->owned.emplace(name, source, std::move(decls), std::move(options));
    handle->tmpl = &*handle->owned;
    *out = handle.release();
  });
}

int kjit_template_builtin(const char *name, kjit_template **out) {
  return guarded([&] {
    require(name && out, "name or out");
    *out = new kjit_template{std::nullopt, &kjit::templates::find(name)};
  });
}

void kjit_template_destroy(kjit_template *tmpl) { delete tmpl; }
const char *kjit_template_name(const kjit_template *tmpl) { return tmpl->tmpl->name().c_str(); }

int kjit_compile(kjit_runtime *runtime, const kjit_template *tmpl, const kjit_param *params,
                 size_t param_count, const char *target, const kjit_code **out) {
  return guarded([&] {
    require(runtime && tmpl && target && out, "runtime, template, target or out");
    const kjit::CodeObject &code = runtime->runtime.compile(
        *tmpl->tmpl, to_param_values(params, param_count), kjit::jit::Target::parse(target));
    const std::lock_guard lock(runtime->mutex);
    std::unique_ptr<kjit_code> &handle = runtime->codes[&code];
    if (!handle)
      handle.reset(new kjit_code{&code, code.key().hex(), code.target().id(),
                                 std::string(kjit::to_string(code.origin()))});
    *out = handle.get();
  });
}

void kjit_code_bytes(const kjit_code *code, const void **data, size_t *size) {
  *data = code->code->code().data();
  *size = code->code->code().size();
}
const char *kjit_code_key(const kjit_code *code) { return code->key.c_str(); }
const char *kjit_code_target(const kjit_code *code) { return code->target.c_str(); }
const char *kjit_code_origin(const kjit_code *code) { return code->origin.c_str(); }
const char *kjit_code_expression(const kjit_code *code) { return code->code->expression().c_str(); }
const char *kjit_code_lowered_name(const kjit_code *code) {
  return code->code->lowered_name().c_str();
}
const char *kjit_code_entry_path(const kjit_code *code) { return code->code->entry_path().c_str(); }
double kjit_code_compile_ms(const kjit_code *code) { return code->code->compile_ms(); }

int kjit_kernel_get(kjit_runtime *runtime, const kjit_template *tmpl, const kjit_param *params,
                    size_t param_count, int device, const kjit_kernel **out) {
  return guarded([&] {
    require(runtime && tmpl && out, "runtime, template or out");
    const kjit::Kernel &kernel = runtime->runtime.kernel(
        *tmpl->tmpl, to_param_values(params, param_count), device_of(*runtime, device));
    const std::lock_guard lock(runtime->mutex);
    std::unique_ptr<kjit_kernel> &handle = runtime->kernels[&kernel];
    if (!handle) {
      handle.reset(new kjit_kernel{&kernel, {}, {}});
      for (const kjit::KernelParameter &parameter : kernel.signature().parameters()) {
        handle->sizes.push_back(parameter.size);
        handle->offsets.push_back(handle->packed_size);
        handle->packed_size += (parameter.size + 7) / 8 * 8;
      }
    }
    *out = handle.get();
  });
}

const char *kjit_kernel_name(const kjit_kernel *kernel) { return kernel->kernel->name().c_str(); }
int kjit_kernel_device(const kjit_kernel *kernel) { return kernel->kernel->device().ordinal(); }
const char *kjit_kernel_backend(const kjit_kernel *kernel) {
  // to_string's names are string literals: the view's data is NUL-terminated.
  return kjit::to_string(kernel->kernel->device().backend()).data();
}
void *kjit_kernel_native_handle(const kjit_kernel *kernel) {
  return kernel->kernel->native_handle();
}
size_t kjit_kernel_arg_count(const kjit_kernel *kernel) { return kernel->sizes.size(); }
const char *kjit_kernel_arg_type(const kjit_kernel *kernel, size_t index) {
  const auto &parameters = kernel->kernel->signature().parameters();
  return index < parameters.size() ? parameters[index].type.c_str() : nullptr;
}
uint32_t kjit_kernel_arg_size(const kjit_kernel *kernel, size_t index) {
  return index < kernel->sizes.size() ? kernel->sizes[index] : 0;
}

int kjit_kernel_launch(const kjit_kernel *kernel, const kjit_launch_config *config,
                       void *const *args, const uint32_t *sizes, size_t arg_count) {
  return guarded([&] {
    require(kernel && config, "kernel or config");
    require((args && sizes) || arg_count == 0, "args or sizes");
    const kjit::KernelSignature &signature = kernel->kernel->signature();
    if (arg_count != kernel->sizes.size() ||
        !std::equal(sizes, sizes + arg_count, kernel->sizes.begin()))
      throw kjit::Error(kjit::Errc::bad_argument,
                        kernel->kernel->name() + ": given " + std::to_string(arg_count) +
                            " arguments whose sizes do not match the kernel's " +
                            signature.to_string());
    kernel->kernel->launch_packed(to_launch_config(*config), const_cast<void **>(args));
  });
}

int kjit_kernel_launch_packed(const kjit_kernel *kernel, const void *packed) {
  return guarded([&] {
    require(kernel && packed, "kernel or packed");
    const auto *bytes = static_cast<const std::byte *>(packed);
    // Kernels with more parameters than this are rare; they pay for an allocation.
    constexpr std::size_t inline_count = 32;
    void *inline_args[inline_count];
    std::vector<void *> heap_args;
    void **args = inline_args;
    if (kernel->offsets.size() > inline_count) {
      heap_args.resize(kernel->offsets.size());
      args = heap_args.data();
    }
    for (std::size_t i = 0; i < kernel->offsets.size(); ++i)
      args[i] = const_cast<std::byte *>(bytes + kernel->offsets[i]);
    kjit_launch_config config;
    std::memcpy(&config, packed, sizeof config);
    kernel->kernel->launch_packed(to_launch_config(config), args);
  });
}

uint32_t kjit_kernel_arg_offset(const kjit_kernel *kernel, size_t index) {
  return index < kernel->offsets.size() ? kernel->offsets[index] : 0;
}
uint32_t kjit_kernel_packed_size(const kjit_kernel *kernel) { return kernel->packed_size; }

int kjit_default_device(kjit_runtime *runtime, int *ordinal) {
  *ordinal = -1;
  return guarded([&] { *ordinal = runtime->runtime.default_device().ordinal(); });
}

int kjit_rms_norm(kjit_runtime *rt, int dtype, void *out, const void *x, const void *weight,
                  float eps, int rows, int hidden, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::rms_norm(runtime_of(rt), as<T>(out), as<T>(x), as<T>(weight), eps, rows, hidden,
                          stream);
    });
  });
}

int kjit_fused_add_rms_norm(kjit_runtime *rt, int dtype, void *x, void *residual,
                            const void *weight, float eps, int rows, int hidden, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::fused_add_rms_norm(runtime_of(rt), as<T>(x), as<T>(residual), as<T>(weight), eps,
                                    rows, hidden, stream);
    });
  });
}

int kjit_layer_norm(kjit_runtime *rt, int dtype, void *out, const void *x, const void *weight,
                    const void *bias, float eps, int rows, int hidden, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::layer_norm(runtime_of(rt), as<T>(out), as<T>(x), as<T>(weight), as<T>(bias), eps,
                            rows, hidden, stream);
    });
  });
}

int kjit_softmax(kjit_runtime *rt, int dtype, void *out, const void *x, float scale, int rows,
                 int cols, int causal_queries, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::softmax(runtime_of(rt), as<T>(out), as<T>(x), scale, rows, cols, causal_queries,
                         stream);
    });
  });
}

int kjit_activation(kjit_runtime *rt, int activation, int dtype, void *out, const void *x,
                    int64_t n, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      using Function = void (*)(kjit::Runtime &, T *, const T *, std::int64_t, kjit::Stream);
      static constexpr Function functions[] = {kjit::ops::silu<T>, kjit::ops::gelu<T>,
                                               kjit::ops::gelu_tanh<T>, kjit::ops::relu<T>,
                                               kjit::ops::sigmoid<T>};
      if (activation < 0 || activation > KJIT_SIGMOID)
        throw kjit::Error(kjit::Errc::bad_argument,
                          "activation " + std::to_string(activation) + " is not a kjit_activation");
      functions[activation](runtime_of(rt), as<T>(out), as<T>(x), n, stream);
    });
  });
}

int kjit_activation_and_mul(kjit_runtime *rt, int activation, int dtype, void *out, const void *x,
                            int rows, int d, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      using Function = void (*)(kjit::Runtime &, T *, const T *, int, int, kjit::Stream);
      static constexpr Function functions[] = {
          kjit::ops::silu_and_mul<T>, kjit::ops::gelu_and_mul<T>, kjit::ops::gelu_tanh_and_mul<T>};
      if (activation < 0 || activation > KJIT_GELU_TANH)
        throw kjit::Error(kjit::Errc::bad_argument,
                          "activation " + std::to_string(activation) +
                              " has no gated form (silu, gelu, gelu_tanh)");
      functions[activation](runtime_of(rt), as<T>(out), as<T>(x), rows, d, stream);
    });
  });
}

int kjit_rotary_embedding(kjit_runtime *rt, int dtype, const int64_t *positions, void *query,
                          void *key, const void *cos_sin_cache, int max_position, int tokens,
                          int q_heads, int kv_heads, int head_size, int rotary_dim, int style,
                          void *stream) {
  return guarded([&] {
    if (style != 0 && style != 1)
      throw kjit::Error(kjit::Errc::bad_argument, "rotary style " + std::to_string(style) +
                                                      " is neither neox (0) nor gptj (1)");
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::rotary_embedding(
          runtime_of(rt), positions, as<T>(query), as<T>(key), as<T>(cos_sin_cache), max_position,
          tokens, q_heads, kv_heads, head_size, rotary_dim,
          style == 0 ? kjit::ops::RotaryStyle::neox : kjit::ops::RotaryStyle::gptj, stream);
    });
  });
}

int kjit_quant_int8(kjit_runtime *rt, int dtype, int8_t *out, float *scales, const void *input,
                    int rows, int hidden, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::dynamic_per_token_quant_int8(runtime_of(rt), out, scales, as<T>(input), rows,
                                              hidden, stream);
    });
  });
}

int kjit_quant_fp8(kjit_runtime *rt, int dtype, uint8_t *out, float *scales, const void *input,
                   int rows, int hidden, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::dynamic_per_token_quant_fp8(runtime_of(rt), out, scales, as<T>(input), rows,
                                             hidden, stream);
    });
  });
}

int kjit_gemm(kjit_runtime *rt, int dtype, void *c, const void *a, const void *b, int m, int n,
              int k, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::gemm(runtime_of(rt), as<T>(c), as<T>(a), as<T>(b), m, n, k, stream);
    });
  });
}

int kjit_linear(kjit_runtime *rt, int dtype, void *c, const void *a, const void *w, int m, int n,
                int k, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::linear(runtime_of(rt), as<T>(c), as<T>(a), as<T>(w), m, n, k, stream);
    });
  });
}

int kjit_flash_attention(kjit_runtime *rt, int dtype, void *out, const void *q, const void *k,
                         const void *v, const int *cu_seqlens_q, const int *cu_seqlens_k, int batch,
                         int total_q, int total_k, int max_seqlen_q, int q_heads, int kv_heads,
                         int head_dim, int causal, float scale, void *stream) {
  return guarded([&] {
    with_half_element(dtype, "flash_attention", [&]<typename T>(T *) {
      const kjit::ops::AttentionShape shape{.batch = batch,
                                            .total_q = total_q,
                                            .total_k = total_k,
                                            .max_seqlen_q = max_seqlen_q,
                                            .q_heads = q_heads,
                                            .kv_heads = kv_heads,
                                            .head_dim = head_dim,
                                            .causal = causal != 0,
                                            .scale = scale};
      kjit::ops::flash_attention(runtime_of(rt), as<T>(out), as<T>(q), as<T>(k), as<T>(v),
                                 cu_seqlens_q, cu_seqlens_k, shape, stream);
    });
  });
}

int kjit_topk_softmax(kjit_runtime *rt, int dtype, float *weights, int *ids, const void *logits,
                      int tokens, int experts, int top_k, int renormalize, void *stream) {
  return guarded([&] {
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::topk_softmax(runtime_of(rt), weights, ids, as<T>(logits), tokens, experts, top_k,
                              renormalize != 0, stream);
    });
  });
}

int kjit_moe_topk(kjit_runtime *rt, int dtype, float *weights, int *ids, const void *logits,
                  const float *bias, int tokens, int experts, int top_k, int scoring, int groups,
                  int top_groups, int renormalize, float scale, void *stream) {
  return guarded([&] {
    if (scoring != KJIT_MOE_SOFTMAX && scoring != KJIT_MOE_SIGMOID)
      throw kjit::Error(kjit::Errc::bad_argument, "moe_topk: scoring " + std::to_string(scoring) +
                                                      " is neither softmax (0) nor sigmoid (1)");
    using Options = kjit::ops::TopkOptions;
    const Options options{.scoring = scoring == KJIT_MOE_SIGMOID ? Options::Scoring::sigmoid
                                                                 : Options::Scoring::softmax,
                          .groups = groups,
                          .top_groups = top_groups,
                          .renormalize = renormalize != 0,
                          .scale = scale};
    with_element(dtype, [&]<typename T>(T *) {
      kjit::ops::moe_topk(runtime_of(rt), weights, ids, as<T>(logits), bias, tokens, experts, top_k,
                          options, stream);
    });
  });
}

int kjit_fused_moe_workspace_bytes(int dtype, int tokens, int top_k, int experts, int hidden,
                                   int inter, size_t *bytes) {
  return moe_workspace_bytes(
      "fused_moe_workspace_bytes", dtype, tokens, top_k, experts, hidden, inter, bytes,
      [&]<typename T>(T *) {
        return kjit::ops::MoeWeights<T>{
            .w13 = nullptr, .w2 = nullptr, .experts = experts, .hidden = hidden, .inter = inter};
      });
}

int kjit_fused_moe(kjit_runtime *rt, int dtype, void *out, const void *x, const float *weights,
                   const int *ids, int tokens, int top_k, const void *w13, const void *w2,
                   int experts, int hidden, int inter, void *workspace, size_t workspace_bytes,
                   void *stream) {
  return kjit_fused_moe_ex(rt, dtype, out, x, weights, ids, tokens, top_k, w13, w2, experts, hidden,
                           inter, workspace, workspace_bytes, 0, stream);
}

int kjit_fused_moe_ex(kjit_runtime *rt, int dtype, void *out, const void *x, const float *weights,
                      const int *ids, int tokens, int top_k, const void *w13, const void *w2,
                      int experts, int hidden, int inter, void *workspace, size_t workspace_bytes,
                      int validate, void *stream) {
  return call_fused_moe(
      rt, dtype, out, x, weights, ids, tokens, top_k,
      [&]<typename T>(T *) {
        return kjit::ops::MoeWeights<T>{.w13 = as<T>(w13),
                                        .w2 = as<T>(w2),
                                        .experts = experts,
                                        .hidden = hidden,
                                        .inter = inter};
      },
      workspace, workspace_bytes, validate, stream);
}

int kjit_fused_moe_fp8_workspace_bytes(int dtype, int tokens, int top_k, int experts, int hidden,
                                       int inter, size_t *bytes) {
  // The sizes alone matter here: the weights and scales are described without memory.
  return moe_workspace_bytes(
      "fused_moe_fp8_workspace_bytes", dtype, tokens, top_k, experts, hidden, inter, bytes,
      [&](auto *) { return to_fp8_layer(nullptr, {}, nullptr, {}, experts, hidden, inter); });
}

int kjit_fused_moe_fp8(kjit_runtime *rt, int dtype, void *out, const void *x, const float *weights,
                       const int *ids, int tokens, int top_k, const uint8_t *w13,
                       const float *w13_scales, int w13_scales_experts, int w13_scales_rows,
                       int w13_scales_columns, const uint8_t *w2, const float *w2_scales,
                       int w2_scales_experts, int w2_scales_rows, int w2_scales_columns,
                       int experts, int hidden, int inter, void *workspace, size_t workspace_bytes,
                       void *stream) {
  return kjit_fused_moe_fp8_ex(rt, dtype, out, x, weights, ids, tokens, top_k, w13, w13_scales,
                               w13_scales_experts, w13_scales_rows, w13_scales_columns, w2,
                               w2_scales, w2_scales_experts, w2_scales_rows, w2_scales_columns,
                               experts, hidden, inter, workspace, workspace_bytes, 0, stream);
}

int kjit_fused_moe_fp8_ex(kjit_runtime *rt, int dtype, void *out, const void *x,
                          const float *weights, const int *ids, int tokens, int top_k,
                          const uint8_t *w13, const float *w13_scales, int w13_scales_experts,
                          int w13_scales_rows, int w13_scales_columns, const uint8_t *w2,
                          const float *w2_scales, int w2_scales_experts, int w2_scales_rows,
                          int w2_scales_columns, int experts, int hidden, int inter,
                          void *workspace, size_t workspace_bytes, int validate, void *stream) {
  const kjit::ops::MoeWeightsFp8 layer = to_fp8_layer(
      w13, {w13_scales, w13_scales_experts, w13_scales_rows, w13_scales_columns}, w2,
      {w2_scales, w2_scales_experts, w2_scales_rows, w2_scales_columns}, experts, hidden, inter);
  return call_fused_moe(
      rt, dtype, out, x, weights, ids, tokens, top_k, [&](auto *) { return layer; }, workspace,
      workspace_bytes, validate, stream);
}

int kjit_moe_align_rows(int pairs, int experts, int block_m, size_t *rows) {
  if (rows)
    *rows = 0;
  return guarded([&] {
    require(rows, "rows");
    // moe_align refuses these itself; the rows of an alignment for them would be meaningless.
    if (pairs < 0 || experts < 1 ||
        (block_m != 16 && block_m != 32 && block_m != 64 && block_m != 128))
      throw kjit::Error(kjit::Errc::bad_argument,
                        "moe_align_rows: pairs " + std::to_string(pairs) + ", experts " +
                            std::to_string(experts) + ", block_m " + std::to_string(block_m) +
                            ": pairs must be >= 0, experts >= 1 and block_m 16, 32, 64 or 128");
    *rows = kjit::ops::moe_align_rows(pairs, experts, block_m);
  });
}

int kjit_moe_align(kjit_runtime *rt, int *sorted_pairs, int *block_experts, int *pair_positions,
                   int *totals, const int *ids, int pairs, int experts, int block_m, void *stream) {
  return guarded([&] {
    kjit::ops::moe_align(runtime_of(rt), {sorted_pairs, block_experts, pair_positions, totals}, ids,
                         pairs, experts, block_m, stream);
  });
}

int kjit_paged_attention_workspace_bytes(kjit_runtime *rt, int q_heads, int num_blocks,
                                         int page_size, int kv_heads, int head_dim, int kv_format,
                                         int batch, int max_blocks, int max_seq_len,
                                         size_t *bytes) {
  if (bytes)
    *bytes = 0;
  return guarded([&] {
    require(bytes, "bytes");
    // The sizes alone matter here: the cache and the tables are described without memory.
    const kjit::ops::PagedKvCache cache = to_paged_cache(nullptr, nullptr, num_blocks, page_size,
                                                         kv_heads, head_dim, kv_format, 1.0f, 1.0f);
    const kjit::ops::DecodeBatch tables{
        .batch = batch, .max_blocks = max_blocks, .max_seq_len = max_seq_len};
    *bytes = kjit::ops::paged_attention_workspace_bytes(runtime_of(rt), q_heads, cache, tables);
  });
}

int kjit_paged_attention_decode(kjit_runtime *rt, int dtype, void *out, const void *q, int q_heads,
                                const void *k_cache, const void *v_cache, int num_blocks,
                                int page_size, int kv_heads, int head_dim, int kv_format,
                                float k_scale, float v_scale, const int *block_tables,
                                const int *seq_lens, int batch, int max_blocks, int max_seq_len,
                                int validate, float scale, void *workspace, size_t workspace_bytes,
                                void *stream) {
  return guarded([&] {
    const kjit::ops::PagedKvCache cache = to_paged_cache(
        k_cache, v_cache, num_blocks, page_size, kv_heads, head_dim, kv_format, k_scale, v_scale);
    const kjit::ops::DecodeBatch tables{.block_tables = block_tables,
                                        .seq_lens = seq_lens,
                                        .batch = batch,
                                        .max_blocks = max_blocks,
                                        .max_seq_len = max_seq_len,
                                        .validate = validate != 0};
    with_half_element(dtype, "paged_attention_decode", [&]<typename T>(T *) {
      kjit::ops::paged_attention_decode(runtime_of(rt), as<T>(out), as<T>(q), q_heads, cache,
                                        tables, scale, {workspace, workspace_bytes}, stream);
    });
  });
}

int kjit_reshape_and_cache(kjit_runtime *rt, int dtype, const void *key, const void *value,
                           void *k_cache, void *v_cache, int num_blocks, int page_size,
                           int kv_heads, int head_dim, int kv_format, float k_scale, float v_scale,
                           const int64_t *slot_mapping, int tokens, int64_t key_stride,
                           int64_t value_stride, const int64_t *positions,
                           const void *cos_sin_cache, int max_position, int rotary_dim,
                           int rotary_style, void *stream) {
  return guarded([&] {
    if (positions != nullptr && rotary_style != 0 && rotary_style != 1)
      throw kjit::Error(kjit::Errc::bad_argument, "rotary style " + std::to_string(rotary_style) +
                                                      " is neither neox (0) nor gptj (1)");
    const kjit::ops::PagedKvCache cache = to_paged_cache(
        k_cache, v_cache, num_blocks, page_size, kv_heads, head_dim, kv_format, k_scale, v_scale);
    with_half_element(dtype, "reshape_and_cache", [&]<typename T>(T *) {
      const kjit::ops::KeyRotation<T> rotation{
          .positions = positions,
          .cos_sin_cache = as<T>(cos_sin_cache),
          .max_position = max_position,
          .rotary_dim = rotary_dim,
          .style = rotary_style == 0 ? kjit::ops::RotaryStyle::neox : kjit::ops::RotaryStyle::gptj};
      kjit::ops::reshape_and_cache(runtime_of(rt), as<T>(key), as<T>(value), cache, slot_mapping,
                                   tokens, key_stride, value_stride,
                                   positions != nullptr ? &rotation : nullptr, stream);
    });
  });
}

int kjit_gemm_fp8_scaled(kjit_runtime *rt, void *d, const uint8_t *a, const float *scale_a,
                         int64_t scale_a_rows, int64_t scale_a_columns, const uint8_t *b,
                         const float *scale_b, int64_t scale_b_rows, int64_t scale_b_columns, int m,
                         int n, int k, void *stream) {
  return call_gemm_fp8(kjit::ops::gemm_fp8_scaled, rt, d, a, scale_a, scale_a_rows, scale_a_columns,
                       b, scale_b, scale_b_rows, scale_b_columns, m, n, k, stream);
}

int kjit_gemm_fp8_blockscale(kjit_runtime *rt, void *d, const uint8_t *a, const float *scale_a,
                             int64_t scale_a_rows, int64_t scale_a_columns, const uint8_t *b,
                             const float *scale_b, int64_t scale_b_rows, int64_t scale_b_columns,
                             int m, int n, int k, void *stream) {
  return call_gemm_fp8(kjit::ops::gemm_fp8_blockscale, rt, d, a, scale_a, scale_a_rows,
                       scale_a_columns, b, scale_b, scale_b_rows, scale_b_columns, m, n, k, stream);
}

int kjit_gemm_fp8_encoding(kjit_runtime *rt, int *encoding) {
  if (encoding)
    *encoding = -1;
  return guarded([&] {
    require(encoding, "encoding");
    const kjit::ops::Fp8Encoding read =
        kjit::ops::gemm_fp8_encoding(runtime_of(rt).default_device().target());
    *encoding = read == kjit::ops::Fp8Encoding::e4m3fnuz ? KJIT_FP8_E4M3FNUZ : KJIT_FP8_E4M3FN;
  });
}

uint32_t kjit_abi_minor(void) { return KJIT_C_ABI_MINOR; }

int kjit_op_get(kjit_runtime *runtime, const char *name, const kjit_op **out) {
  return guarded([&] {
    require(runtime && name && out, "runtime, name or out");
    const auto found = std::find_if(std::begin(packed_ops), std::end(packed_ops),
                                    [&](const PackedOp &op) { return op.name == name; });
    if (found == std::end(packed_ops)) {
      std::string known;
      for (const PackedOp &op : packed_ops)
        known += (known.empty() ? "" : ", ") + std::string(op.name);
      throw kjit::Error(kjit::Errc::bad_argument,
                        "no operator " + std::string(name) + " (known: " + known + ")");
    }
    const std::lock_guard lock(runtime->mutex);
    *out = &runtime->ops.try_emplace(found->name, kjit_op{runtime, found->call}).first->second;
  });
}

void kjit_free(char *text) { std::free(text); }

int kjit_cache_stats(char **json) { return cache_command("stats", json); }

int kjit_cache_ls(const char *target, const char *template_name, char **json) {
  return cache_command("ls", json, [&](kjit::cli::CacheArgs &args) {
    args.target = text(target);
    args.template_name = text(template_name);
  });
}

int kjit_cache_verify(char **json) { return cache_command("verify", json); }

int kjit_cache_prune(const char *max_size, const char *older_than, char **json) {
  return cache_command("prune", json, [&](kjit::cli::CacheArgs &args) {
    args.max_size = text(max_size);
    args.older_than = text(older_than);
  });
}

int kjit_cache_clear(char **json) { return cache_command("clear", json); }

int kjit_tune(const char *op, const char *shapes_file, double budget_s, const char *const *space,
              size_t space_count, char **json) {
  return guarded([&] {
    require(op && shapes_file, "op or shapes_file");
    require(space || space_count == 0, "space");
    kjit::cli::TuneArgs args;
    args.op = op;
    args.shapes = shapes_file;
    if (budget_s > 0)
      args.budget_s = budget_s;
    for (std::size_t i = 0; i < space_count; ++i) {
      require(space[i], "a space item");
      args.space.emplace_back(space[i]);
    }
    document(json, [&](std::ostream &out) { kjit::cli::tune_shapes(args, /*as_json=*/true, out); });
  });
}

int kjit_prebuild(const char *targets, const char *level, const char *const *sets, size_t set_count,
                  const char *out, int jobs, const char *worker, char **json) {
  return guarded([&] {
    require(sets || set_count == 0, "sets");
    kjit::cli::PrebuildArgs args;
    args.targets = text(targets);
    args.level = text(level);
    args.out = text(out);
    for (std::size_t i = 0; i < set_count; ++i) {
      require(sets[i], "a set file");
      args.sets.emplace_back(sets[i]);
    }
    args.worker = text(worker);
    // Without a worker command, this process (the caller's program) cannot be one.
    if (worker == nullptr)
      args.jobs = 1;
    else if (jobs != 0)
      args.jobs = jobs;
    document(json, [&](std::ostream &document_out) {
      kjit::cli::run_prebuild(args, /*as_json=*/true, document_out);
    });
  });
}

int kjit_op_launch_packed(const kjit_op *op, const void *packed) {
  if (op == nullptr || packed == nullptr)
    return fail(KJIT_BAD_ARGUMENT, "op or packed is null");
  // The operator function guards itself.
  return op->call(op->runtime, static_cast<const std::byte *>(packed));
}

} // extern "C"
