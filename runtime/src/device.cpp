// What both device backends share: opening a driver, describing its devices, device memory.
#include "device_driver.hpp"

#include "kjit/log.hpp"

#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <link.h>

namespace kjit {

std::string_view to_string(Backend backend) { return backend == Backend::hip ? "HIP" : "CUDA"; }

namespace detail {

std::string describe_device(const DeviceState &device) {
  return std::string(to_string(device.api->backend)) + " device " + std::to_string(device.ordinal) +
         " (" + device.name + ")";
}

void throw_driver_error(const DeviceState &device, const char *symbol, DriverResult result) {
  throw Error(Errc::device_error, std::string(symbol) + " on " + describe_device(device) +
                                      " failed: " + device.api->describe(result));
}

void warn_driver_error(const DeviceState &device, const char *symbol, DriverResult result) {
  log().warn("{} on {} failed: {}", symbol, describe_device(device), device.api->describe(result));
}

Context DeviceState::make_context() const {
  std::lock_guard lock(context_mutex_);
  Context made = context_.load(std::memory_order_acquire);
  if (made == 0) {
    check(*this, api->device_context, api->device_context(handle, &made));
    context_.store(made, std::memory_order_release);
  }
  return made;
}

namespace {

std::string loaded_path(void *library, const std::string &fallback) {
  link_map *map = nullptr;
  if (dlinfo(library, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr)
    return fallback;
  std::error_code ignored;
  std::filesystem::path resolved = std::filesystem::canonical(map->l_name, ignored);
  return resolved.empty() ? std::string(map->l_name) : resolved.string();
}

// Every symbol of `api`, in one list: the shared calls, then the vendor's own.
std::vector<DriverSymbol> symbols_of(DriverApi &api) {
  std::vector<DriverSymbol> symbols = {bind(api.init),
                                       bind(api.device_count),
                                       bind(api.device_get),
                                       bind(api.device_name),
                                       bind(api.module_load_data),
                                       bind(api.module_get_function),
                                       bind(api.module_unload),
                                       bind(api.launch_kernel),
                                       bind(api.function_attribute),
                                       bind(api.allocate),
                                       bind(api.free_memory),
                                       bind(api.copy_to_device),
                                       bind(api.copy_to_host),
                                       bind(api.synchronize),
                                       bind(api.event_create, false),
                                       bind(api.event_record, false),
                                       bind(api.event_synchronize, false),
                                       bind(api.event_destroy, false),
                                       bind(api.fill_async, false)};
  symbols.insert(symbols.end(), api.vendor_symbols.begin(), api.vendor_symbols.end());
  return symbols;
}

// Resolves every symbol before storing any, so that a failed attempt leaves `api` untouched.
// Returns the reason of a failure, or an empty string.
std::string resolve_symbols(void *library, const std::string &path, DriverApi &api) {
  const std::vector<DriverSymbol> symbols = symbols_of(api);
  std::vector<void *> addresses;
  for (const DriverSymbol &entry : symbols) {
    void *address = dlsym(library, entry.symbol);
    if (address == nullptr && entry.required)
      return path + " has no " + entry.symbol + " (a driver older than kjit supports?)";
    addresses.push_back(address);
  }
  for (std::size_t i = 0; i < symbols.size(); ++i)
    store_symbol(symbols[i], addresses[i]);
  return {};
}

std::string call_failed(const DriverApi &api, const char *symbol, DriverResult result) {
  std::string reason = std::string(symbol) + " failed: " + api.describe(result);
  if (api.device_file != nullptr && !std::filesystem::exists(api.device_file))
    reason += "; " + std::string(api.device_file) + " does not exist (no GPU kernel driver)";
  return reason;
}

// Describes device `ordinal` into `opened`, or returns why it cannot be used.
std::string describe_device_into(const DriverApi &api, int ordinal, OpenedBackend &opened) {
  int handle = 0;
  char name[256] = {};
  std::string target;
  const char *symbol = api.device_get.symbol;
  DriverResult result = api.device_get(&handle, ordinal);
  if (result == 0) {
    symbol = api.device_name.symbol;
    result = api.device_name(name, sizeof name - 1, handle);
  }
  if (result == 0) {
    symbol = api.native_target.symbol;
    result = api.native_target(handle, &target);
  }
  if (result != 0)
    return call_failed(api, symbol, result);
  std::optional<int> newest_code_object;
  if (api.newest_code_object_version.function != nullptr) {
    int version = 0;
    if (result = api.newest_code_object_version(&version); result != 0)
      return call_failed(api, api.newest_code_object_version.symbol, result);
    newest_code_object = version;
  }
  try {
    opened.states.emplace_back(api, ordinal, handle, name, jit::Target::parse(target));
  } catch (const Error &error) {
    return error.summary();
  }
  opened.states.back().newest_code_object_version = newest_code_object;
  return {};
}

void describe_devices(const DriverApi &api, int count, OpenedBackend &opened) {
  std::string skipped;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    std::string problem = describe_device_into(api, ordinal, opened);
    if (problem.empty())
      continue;
    log().warn("skipping {} device {}: {}", to_string(api.backend), ordinal, problem);
    skipped +=
        (skipped.empty() ? "" : "; ") + ("device " + std::to_string(ordinal) + ": ") + problem;
  }
  for (const DeviceState &state : opened.states)
    opened.devices.push_back(DeviceAccess::device(state));
  if (opened.devices.empty())
    opened.no_device_reason = "no usable device (" + skipped + ")";
}

} // namespace

OpenedBackend open_backend(DriverApi &api) {
  OpenedBackend opened;
  void *library = nullptr;
  std::string failures;
  for (const std::string &candidate : api.libraries) {
    // RTLD_NODELETE: the drivers start threads and register exit handlers; unmapping them under
    // those would crash the process at exit.
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (library != nullptr)
      break;
    const char *error = dlerror();
    failures += (failures.empty() ? "" : "; ") + std::string(error ? error : candidate);
  }
  if (library == nullptr) {
    opened.no_device_reason = api.library_label + " not found (" + failures + ")";
    return opened;
  }
  const std::string path = loaded_path(library, api.libraries.front());
  if (std::string problem = resolve_symbols(library, path, api); !problem.empty()) {
    dlclose(library);
    opened.no_device_reason = std::move(problem);
    return opened;
  }
  // From here on the library stays loaded for the process: the function pointers point into it.
  if (DriverResult result = api.init(0); result != 0) {
    opened.no_device_reason = call_failed(api, api.init.symbol, result);
    return opened;
  }
  int count = 0;
  if (DriverResult result = api.device_count(&count); result != 0) {
    opened.no_device_reason = call_failed(api, api.device_count.symbol, result);
    return opened;
  }
  if (count <= 0) {
    opened.no_device_reason = std::string(api.device_count.symbol) + " found no device";
    return opened;
  }
  describe_devices(api, count, opened);
  for (const DeviceState &state : opened.states)
    log().debug("{}: {} via {}", describe_device(state), state.target.id(), path);
  return opened;
}

} // namespace detail

namespace {

// One per backend for the process, opened on first use; concurrent first calls wait for one
// opening. Deliberately never destroyed: Modules and buffers held in other static objects may be
// released after this one would be.
const detail::OpenedBackend &opened(Backend backend) {
  if (backend == Backend::hip) {
    static const auto &hip = *new detail::OpenedBackend(detail::open_backend(detail::hip_driver()));
    return hip;
  }
  static const auto &cuda = *new detail::OpenedBackend(detail::open_backend(detail::cuda_driver()));
  return cuda;
}

[[noreturn]] void no_device(std::string reason) {
  throw Error(Errc::no_device, "no GPU: " + reason);
}

} // namespace

std::span<const Device> devices(BackendChoice choice) {
  if (choice != BackendChoice::automatic) {
    const auto &backend = opened(choice == BackendChoice::hip ? Backend::hip : Backend::cuda);
    if (backend.devices.empty())
      no_device(backend.no_device_reason);
    return backend.devices;
  }
  const auto &hip = opened(Backend::hip);
  if (!hip.devices.empty())
    return hip.devices;
  const auto &cuda = opened(Backend::cuda);
  if (!cuda.devices.empty())
    return cuda.devices;
  no_device("HIP: " + hip.no_device_reason + "; CUDA: " + cuda.no_device_reason);
}

std::span<const Device> devices() { return devices(backend_choice_from_environment()); }

Backend Device::backend() const { return state_->api->backend; }
Vendor Device::vendor() const { return backend() == Backend::hip ? Vendor::amd : Vendor::nvidia; }
int Device::ordinal() const { return state_->ordinal; }
const std::string &Device::name() const { return state_->name; }
const jit::Target &Device::target() const { return state_->target; }
std::optional<int> Device::newest_code_object_version() const {
  return state_->newest_code_object_version;
}

int Device::multiprocessors() const {
  const detail::DriverApi &api = *state_->api;
  int count = 0;
  detail::check(*state_, api.multiprocessors, api.multiprocessors(state_->handle, &count));
  return count;
}

DeviceBuffer Device::allocate(std::size_t bytes) const {
  if (bytes == 0) // the drivers refuse empty allocations; an empty buffer needs no memory
    return DeviceBuffer(*this, nullptr, 0);
  const detail::DriverApi &api = *state_->api;
  detail::ScopedContext current(*state_);
  void *address = nullptr;
  detail::check(*state_, api.allocate, api.allocate(&address, bytes));
  return DeviceBuffer(*this, address, bytes);
}

void Device::synchronize() const {
  const detail::DriverApi &api = *state_->api;
  detail::ScopedContext current(*state_);
  detail::check(*state_, api.synchronize, api.synchronize());
}

namespace {

// Throws Error(device_error) when the driver lacks `call`, an optional one.
template <typename Signature>
void require_call(const detail::DeviceState &state, const detail::DriverCall<Signature> &call) {
  if (call.function == nullptr)
    throw Error(Errc::device_error, detail::describe_device(state) + ": the driver has no " +
                                        call.symbol + " (needed to time kernels)");
}

} // namespace

std::size_t Device::shared_memory_per_block() const {
  const detail::DriverApi &api = *state_->api;
  std::size_t bytes = 0;
  detail::check(*state_, api.shared_bytes_per_block,
                api.shared_bytes_per_block(state_->handle, &bytes));
  return bytes;
}

void Device::fill(void *address, unsigned char byte, std::size_t bytes, Stream stream) const {
  const detail::DriverApi &api = *state_->api;
  require_call(*state_, api.fill_async);
  detail::ScopedContext current(*state_);
  detail::check(*state_, api.fill_async, api.fill_async(address, byte, bytes, stream));
}

void Device::copy_to_host(void *host, const void *address, std::size_t bytes) const {
  const detail::DriverApi &api = *state_->api;
  detail::ScopedContext current(*state_);
  detail::check(*state_, api.copy_to_host, api.copy_to_host(host, address, bytes));
}

EventTimer::EventTimer(const Device &device) : device_(device) {
  const detail::DeviceState &state = detail::DeviceAccess::state(device);
  const detail::DriverApi &api = *state.api;
  require_call(state, api.event_create);
  require_call(state, api.event_record);
  require_call(state, api.event_synchronize);
  require_call(state, api.event_destroy);
  detail::ScopedContext current(state);
  detail::check(state, api.event_create, api.event_create(&start_, 0));
  if (detail::DriverResult result = api.event_create(&stop_, 0); result != 0) {
    api.event_destroy(start_);
    detail::throw_driver_error(state, api.event_create.symbol, result);
  }
}

EventTimer::~EventTimer() {
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  detail::ScopedContext current(state);
  for (void *event : {start_, stop_})
    if (detail::DriverResult result = state.api->event_destroy(event); result != 0)
      detail::warn_driver_error(state, state.api->event_destroy.symbol, result);
}

void EventTimer::start(Stream stream) {
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  detail::ScopedContext current(state);
  detail::check(state, state.api->event_record, state.api->event_record(start_, stream));
}

void EventTimer::stop(Stream stream) {
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  detail::ScopedContext current(state);
  detail::check(state, state.api->event_record, state.api->event_record(stop_, stream));
}

double EventTimer::elapsed_ms() const {
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  const detail::DriverApi &api = *state.api;
  detail::ScopedContext current(state);
  detail::check(state, api.event_synchronize, api.event_synchronize(stop_));
  float milliseconds = 0;
  detail::check(state, api.event_elapsed, api.event_elapsed(&milliseconds, start_, stop_));
  return milliseconds;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : device_(other.device_), address_(std::exchange(other.address_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  std::swap(device_, other.device_);
  std::swap(address_, other.address_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (address_ == nullptr)
    return;
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  try {
    detail::ScopedContext current(state);
    if (detail::DriverResult result = state.api->free_memory(address_); result != 0)
      detail::warn_driver_error(state, state.api->free_memory.symbol, result);
  } catch (const Error &error) {
    log().warn("leaking {} bytes of device memory: {}", bytes_, error.summary());
  }
}

namespace {

void check_copy_size(const DeviceBuffer &buffer, std::size_t bytes, const char *direction) {
  if (bytes > buffer.size())
    throw Error(Errc::bad_argument, "cannot copy " + std::to_string(bytes) + " bytes " + direction +
                                        " a device buffer of " + std::to_string(buffer.size()) +
                                        " bytes");
}

} // namespace

void DeviceBuffer::write(const void *host, std::size_t bytes) {
  check_copy_size(*this, bytes, "into");
  if (bytes == 0)
    return;
  const detail::DeviceState &state = detail::DeviceAccess::state(device_);
  detail::ScopedContext current(state);
  detail::check(state, state.api->copy_to_device, state.api->copy_to_device(address_, host, bytes));
}

void DeviceBuffer::read(void *host, std::size_t bytes) const {
  check_copy_size(*this, bytes, "out of");
  if (bytes == 0)
    return;
  device_.copy_to_host(host, address_, bytes);
}

} // namespace kjit
