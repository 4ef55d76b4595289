// headroom's CPU tensor pool (vendor/torch-sys/README.md, crates/train/src/cpu_pool.rs): libtorch's
// CPU allocator replaced by one that hands every block of at least `min_bytes` to two functions
// the binary gives (headroom's pool, which keeps freed blocks for reuse up to a bound) and every
// smaller one to libtorch's own `alloc_cpu`, as the default allocator does.
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <cstddef>

namespace {
using PoolAlloc = void *(*)(size_t);
using PoolFree = int (*)(void *);

PoolAlloc pool_alloc = nullptr;
PoolFree pool_free = nullptr;
size_t pool_min_bytes = 0;

// One deleter for both kinds, so that the raw interface (raw_allocate/raw_deallocate) works: the
// pool answers whether the block was its own.
void release(void *data) {
  if (data == nullptr) return;
  if (pool_free(data) == 0) c10::free_cpu(data);
}

struct PoolAllocator final : at::Allocator {
  at::DataPtr allocate(size_t n) override {
    void *data = nullptr;
    if (n >= pool_min_bytes) {
      data = pool_alloc(n);
      // The default allocator's words, which the out-of-memory step-down recognises.
      TORCH_CHECK(data != nullptr, "DefaultCPUAllocator: not enough memory: you tried to allocate ", n,
                  " bytes.");
    } else {
      data = c10::alloc_cpu(n);
    }
    return {data, data, &release, at::Device(at::DeviceType::CPU)};
  }
  at::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

PoolAllocator the_allocator;
}  // namespace

extern "C" {
// Makes the pool libtorch's CPU allocator for every tensor allocated from now on (tensors already
// allocated keep their own deleter). Once per process: returns 0 when installed, 1 when it already
// was, -1 when libtorch threw.
long headroom_cpu_pool_install(PoolAlloc alloc, PoolFree release_fn, size_t min_bytes) {
  if (pool_alloc != nullptr) return 1;
  try {
    pool_alloc = alloc;
    pool_free = release_fn;
    pool_min_bytes = min_bytes;
    c10::SetCPUAllocator(&the_allocator, /*priority=*/1);
    return 0;
  } catch (...) {
    return -1;
  }
}
}
