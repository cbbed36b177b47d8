#include "kernels/alloc_tuning.h"

namespace rw::kernels {

void TuneAllocatorForScratch() {}

}  // namespace rw::kernels
