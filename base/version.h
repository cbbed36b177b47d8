#pragma once

namespace rw {
// "0.1.0"
const char* Version();
// Short git commit the binary was built from, or "unknown".
const char* GitCommit();
}  // namespace rw
