// headroom's CUDA memory readings (vendor/torch-sys/README.md): the CUDA caching allocator's
// statistics, as torch.cuda.memory_stats() reads them, for `headroom train`'s memory figures and
// step-down trigger on a GPU. Compiled with HEADROOM_CUDA_HEADERS when build.rs finds the CUDA
// runtime headers; otherwise every function answers -4.
//
// No link-time dependency on libc10_cuda.so: the binary loads libtorch's CUDA part at run time
// (dlopen, crates/train/src/lib.rs), so the allocator is found with dlsym, and only its virtual
// methods (declared by the headers of the same libtorch) are called.
#include <cstdint>

#ifdef HEADROOM_CUDA_HEADERS
#include <c10/cuda/CUDACachingAllocator.h>
#include <dlfcn.h>

namespace {
using c10::cuda::CUDACachingAllocator::CUDAAllocator;

// The allocator once libtorch's CUDA part is loaded and its allocator set up; null otherwise.
CUDAAllocator *caching_allocator() {
  // c10::cuda::CUDACachingAllocator::allocator, a std::atomic<CUDAAllocator*>.
  void *symbol = dlsym(RTLD_DEFAULT, "_ZN3c104cuda20CUDACachingAllocator9allocatorE");
  if (symbol == nullptr) return nullptr;
  CUDAAllocator *allocator = static_cast<std::atomic<CUDAAllocator *> *>(symbol)->load();
  return allocator != nullptr && allocator->initialized() ? allocator : nullptr;
}
}  // namespace
#endif

extern "C" {
// Bytes of `device` in the caching allocator: out[0] allocated now, out[1] allocated peak, out[2]
// reserved now, out[3] reserved peak (peaks since the last reset). Returns 0; -1 libtorch's CUDA
// part is not loaded, -2 its allocator is not set up (no CUDA tensor yet), -3 libtorch threw (no
// such device), -4 built without the CUDA headers.
long headroom_cuda_memory(int device, int64_t *out) {
#ifdef HEADROOM_CUDA_HEADERS
  if (dlsym(RTLD_DEFAULT, "_ZN3c104cuda20CUDACachingAllocator9allocatorE") == nullptr) return -1;
  CUDAAllocator *allocator = caching_allocator();
  if (allocator == nullptr) return -2;
  try {
    auto stats = allocator->getDeviceStats(static_cast<c10::DeviceIndex>(device));
    constexpr auto all = static_cast<size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE);
    out[0] = stats.allocated_bytes[all].current;
    out[1] = stats.allocated_bytes[all].peak;
    out[2] = stats.reserved_bytes[all].current;
    out[3] = stats.reserved_bytes[all].peak;
    return 0;
  } catch (...) {
    return -3;
  }
#else
  (void)device;
  (void)out;
  return -4;
#endif
}

// Resets the peaks of `device` (torch.cuda.reset_peak_memory_stats). Returns as above.
long headroom_cuda_reset_peak(int device) {
#ifdef HEADROOM_CUDA_HEADERS
  if (dlsym(RTLD_DEFAULT, "_ZN3c104cuda20CUDACachingAllocator9allocatorE") == nullptr) return -1;
  CUDAAllocator *allocator = caching_allocator();
  if (allocator == nullptr) return -2;
  try {
    allocator->resetPeakStats(static_cast<c10::DeviceIndex>(device));
    return 0;
  } catch (...) {
    return -3;
  }
#else
  (void)device;
  return -4;
#endif
}
}
