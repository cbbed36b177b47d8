#include "kernels/alloc_tuning.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace rw::kernels {

void TuneAllocatorForScratch() {
#if defined(__GLIBC__)
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum; larger blocks are still mmap()ed
    mallopt(M_TRIM_THRESHOLD, 1 << 30);   // keep up to 1 GiB of freed heap for the next forward
    return true;
  }();
  (void)done;
#endif
}

}  // namespace rw::kernels
