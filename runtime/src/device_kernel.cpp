// Modules, kernels and launches, shared by both backends.
#include "device_driver.hpp"
#include "kjit/log.hpp"
#include "kjit/runtime/kernel.hpp"

namespace kjit {

KernelSignature::KernelSignature(std::vector<KernelParameter> parameters)
    : parameters_(std::move(parameters)) {
  sizes_.reserve(parameters_.size());
  for (const KernelParameter &parameter : parameters_)
    sizes_.push_back(parameter.size);
}

std::string KernelSignature::to_string() const {
  std::string text = "(";
  for (const KernelParameter &parameter : parameters_)
    text += (text.size() > 1 ? ", " : "") + parameter.type;
  return text + ")";
}

namespace {

std::string arguments(std::size_t count) {
  return std::to_string(count) + (count == 1 ? " argument" : " arguments");
}

} // namespace

void KernelSignature::report_mismatch(std::string_view kernel,
                                      std::span<const std::uint32_t> given_sizes,
                                      std::span<const std::string_view> given_types) const {
  const std::string prefix = std::string(kernel) + ": ";
  if (given_sizes.size() != parameters_.size())
    throw Error(Errc::bad_argument, prefix + arguments(given_sizes.size()) +
                                        " given, the kernel takes " +
                                        arguments(parameters_.size()) + " " + to_string());
  for (std::size_t i = 0; i < given_sizes.size(); ++i)
    if (given_sizes[i] != parameters_[i].size)
      throw Error(Errc::bad_argument, prefix + "argument " + std::to_string(i + 1) + " is " +
                                          std::to_string(given_sizes[i]) + " bytes (" +
                                          std::string(given_types[i]) + "), the kernel takes " +
                                          std::to_string(parameters_[i].size) + " (" +
                                          parameters_[i].type + ")");
  throw Error(Errc::bad_argument, prefix + "arguments do not match " + to_string());
}

Module Module::load(const Device &device, std::span<const std::byte> code_object) {
  const detail::DeviceState &state = detail::DeviceAccess::state(device);
  if (code_object.empty())
    throw Error(Errc::bad_argument,
                "cannot load an empty code object on " + detail::describe_device(state));
  const detail::DriverApi &api = *state.api;
  detail::ScopedContext current(state);
  void *handle = nullptr;
  detail::check(state, api.module_load_data, api.module_load_data(&handle, code_object.data()));
  return Module(device, handle);
}

Module::Module(Module &&other) noexcept
    : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}

Module &Module::operator=(Module &&other) noexcept {
  std::swap(device_, other.device_);
  std::swap(handle_, other.handle_);
  return *this;
}

Module::~Module() {
  if (handle_ == nullptr)
    return;
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  try {
    detail::ScopedContext current(state);
    if (detail::DriverResult result = state.api->module_unload(handle_); result != 0)
      detail::warn_driver_error(state, state.api->module_unload.symbol, result);
  } catch (const Error &error) {
    log().warn("leaving a module loaded: {}", error.summary());
  }
}

Kernel Module::kernel(const std::string &lowered_name, KernelSignature signature,
                      std::string display_name) const {
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  const detail::DriverApi &api = *state.api;
  detail::ScopedContext current(state);
  void *function = nullptr;
  if (detail::DriverResult result =
          api.module_get_function(&function, handle_, lowered_name.c_str());
      result != 0)
    throw Error(Errc::device_error, std::string(api.module_get_function.symbol) +
                                        " found no kernel '" + lowered_name +
                                        "' in the module on " + detail::describe_device(state) +
                                        ": " + api.describe(result));
  int registers = 0;
  int max_threads_per_block = 0;
  detail::check(state, api.function_attribute,
                api.function_attribute(&registers, detail::function_attribute_num_regs, function));
  detail::check(state, api.function_attribute,
                api.function_attribute(&max_threads_per_block,
                                       detail::function_attribute_max_threads_per_block, function));
  return Kernel(device_, function, std::move(signature),
                display_name.empty() ? lowered_name : std::move(display_name), registers,
                max_threads_per_block);
}

namespace {

std::string shape(Dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

[[noreturn]] void launch_failed(const detail::DeviceState &state, const char *symbol,
                                const std::string &kernel, const LaunchConfig &config,
                                detail::DriverResult result) {
  const std::string reason = result == detail::driver_lacks_call
                                 ? "this driver has no " + std::string(symbol) +
                                       " (thread-block clusters need a CUDA 12.0 or newer driver)"
                                 : state.api->describe(result);
  throw Error(Errc::device_error,
              std::string(symbol) + " of " + kernel + " on " + detail::describe_device(state) +
                  " with grid " + shape(config.grid) + ", block " + shape(config.block) +
                  (config.cluster.x * config.cluster.y * config.cluster.z != 1
                       ? ", cluster " + shape(config.cluster)
                       : "") +
                  ", " + std::to_string(config.shared_bytes) + " shared bytes failed: " + reason);
}

// Refuses a cluster launch before any driver call where the backend has no clusters or the
// cluster does not tile the grid (which drivers report only as an invalid value).
void check_cluster(const detail::DeviceState &state, const std::string &kernel,
                   const LaunchConfig &config) {
  const Dim3 &grid = config.grid, &cluster = config.cluster;
  if (state.api->launch_cluster.function == nullptr)
    throw Error(Errc::bad_argument, kernel + ": a cluster of " + shape(cluster) +
                                        " blocks cannot launch on " +
                                        detail::describe_device(state) + ", which has no " +
                                        state.api->launch_cluster.symbol);
  if (cluster.x == 0 || cluster.y == 0 || cluster.z == 0 || grid.x % cluster.x != 0 ||
      grid.y % cluster.y != 0 || grid.z % cluster.z != 0)
    throw Error(Errc::bad_argument, kernel + ": the cluster " + shape(cluster) +
                                        " does not divide the grid " + shape(grid));
}

} // namespace

void Kernel::launch_packed(const LaunchConfig &config, void **args) const {
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  const Dim3 &grid = config.grid;
  const Dim3 &block = config.block;
  const Dim3 &cluster = config.cluster;
  const bool clustered = cluster.x != 1 || cluster.y != 1 || cluster.z != 1;
  if (clustered) [[unlikely]]
    check_cluster(state, name_, config);
  detail::ScopedContext current(state);
  const auto &api = *state.api;
  const auto plain = [&] {
    return api.launch_kernel(function_, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                             config.shared_bytes, config.stream, args, nullptr);
  };
  // An overlap is a hint (LaunchConfig): without cuLaunchKernelEx (HIP, an old driver) the launch
  // is an ordinary one.
  bool extended = clustered || (config.overlap_previous && api.launch_cluster.function != nullptr);
  detail::DriverResult result =
      extended ? api.launch_cluster(function_, grid, block, cluster, config.overlap_previous,
                                    config.shared_bytes, config.stream, args)
               : plain();
  if (result == detail::driver_lacks_call && !clustered) [[unlikely]] {
    extended = false;
    result = plain();
  }
  if (result != 0) [[unlikely]]
    launch_failed(state, extended ? api.launch_cluster.symbol : api.launch_kernel.symbol, name_,
                  config, result);
}

int Kernel::max_active_clusters(Dim3 block, Dim3 cluster, unsigned shared_bytes) const {
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  const auto &query = state.api->max_active_clusters;
  check_cluster(state, name_, {.grid = cluster, .block = block, .cluster = cluster});
  detail::ScopedContext current(state);
  int count = 0;
  if (const detail::DriverResult result = query(&count, function_, block, cluster, shared_bytes);
      result != 0)
    throw Error(Errc::device_error, std::string(query.symbol) + " of " + name_ +
                                        " for clusters of " + shape(cluster) + " failed: " +
                                        (result == detail::driver_lacks_call
                                             ? "this driver has no " + std::string(query.symbol)
                                             : state.api->describe(result)));
  return count;
}

void Kernel::allow_shared_bytes(unsigned bytes) const {
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  detail::ScopedContext current(state);
  if (const detail::DriverResult result =
          state.api->allow_shared_bytes(function_, static_cast<int>(bytes));
      result != 0)
    throw Error(Errc::device_error, std::string(state.api->allow_shared_bytes.symbol) + " of " +
                                        name_ + " for " + std::to_string(bytes) +
                                        " shared bytes failed: " + state.api->describe(result));
}

TensorMap encode_tensor_map(const Device &device, const TensorMapShape &shape) {
  const detail::DeviceState &state = detail::DeviceAccess::state(device);
  const auto &encode = state.api->encode_tensor_map;
  if (encode.function == nullptr)
    throw Error(Errc::device_error, detail::describe_device(state) + " has no tensor maps");
  TensorMap map{};
  if (const detail::DriverResult result = encode(&map, shape); result != 0)
    throw Error(Errc::device_error,
                std::string(encode.symbol) + " of a " + std::to_string(shape.rows) + " x " +
                    std::to_string(shape.columns) + " matrix in " + std::to_string(shape.box_rows) +
                    " x " + std::to_string(shape.box_columns) +
                    " boxes failed: " + state.api->describe(result));
  return map;
}

} // namespace kjit
