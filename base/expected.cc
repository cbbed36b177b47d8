#include "base/expected.h"

namespace rw {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid_argument";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kCorrupt: return "corrupt";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kOutOfRange: return "out_of_range";
    case ErrorKind::kResourceExhausted: return "resource_exhausted";
    case ErrorKind::kUnauthenticated: return "unauthenticated";
    case ErrorKind::kUnavailable: return "unavailable";
    case ErrorKind::kCancelled: return "cancelled";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kInternal: return "internal";
  }
  return "internal";
}

std::string Error::ToString() const { return std::string(ErrorKindName(kind)) + ": " + message; }

}  // namespace rw
