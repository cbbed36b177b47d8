#include "base/version.h"

namespace rw {
const char* Version() { return REWIND_VERSION; }
const char* GitCommit() { return REWIND_GIT_COMMIT; }
}  // namespace rw
