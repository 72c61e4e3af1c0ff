// LD_PRELOAD'ed into a kjit process to stand for a machine without hiprtc or NVRTC: dlopen of
// any of their libraries fails, as it does where they are not installed.
#include <cstring>
#include <dlfcn.h>

extern "C" void *dlopen(const char *file, int flags) {
  using Real = void *(*)(const char *, int);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "dlopen"));
  if (file != nullptr &&
      (std::strstr(file, "hiprtc") != nullptr || std::strstr(file, "amdhip64") != nullptr ||
       std::strstr(file, "nvrtc") != nullptr))
    return nullptr;
  return real(file, flags);
}
