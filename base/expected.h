// Input errors as values: Expected<T> holds a T or an Error with a stable type string.
// Broken invariants are not Errors: they abort through REWIND_CHECK (check.h).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace rw {

// Stable error kinds. Each maps to an HTTP status at the server and a metric label.
enum class ErrorKind {
  kInvalidArgument,  // bad parameter or request field            -> 400
  kNotFound,         // missing file, key or tensor               -> 404
  kCorrupt,          // a file that fails validation              -> 400/500
  kUnsupported,      // a valid input this build cannot handle    -> 400
  kOutOfRange,       // a size or position beyond a limit         -> 400
  kResourceExhausted,// memory or cache budget                    -> 503
  kUnauthenticated,  // missing or wrong API key                  -> 401
  kUnavailable,      // loading, shutting down                    -> 503
  kCancelled,        // client went away
  kIo,               // read/write failure
  kInternal,         // should not happen; reported, not aborted
};

const char* ErrorKindName(ErrorKind kind);

struct Error {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;

  static Error InvalidArgument(std::string m) { return {ErrorKind::kInvalidArgument, std::move(m)}; }
  static Error NotFound(std::string m) { return {ErrorKind::kNotFound, std::move(m)}; }
  static Error Corrupt(std::string m) { return {ErrorKind::kCorrupt, std::move(m)}; }
  static Error Unsupported(std::string m) { return {ErrorKind::kUnsupported, std::move(m)}; }
  static Error OutOfRange(std::string m) { return {ErrorKind::kOutOfRange, std::move(m)}; }
  static Error Exhausted(std::string m) { return {ErrorKind::kResourceExhausted, std::move(m)}; }
  static Error Unavailable(std::string m) { return {ErrorKind::kUnavailable, std::move(m)}; }
  static Error Io(std::string m) { return {ErrorKind::kIo, std::move(m)}; }
  static Error Internal(std::string m) { return {ErrorKind::kInternal, std::move(m)}; }

  // "kind: message", for logs and the CLI.
  std::string ToString() const;
};

// A value or an error. Accessing the wrong alternative aborts (a programming error).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Expected(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { Require(); return std::get<0>(v_); }
  const T& value() const& { Require(); return std::get<0>(v_); }
  T&& value() && { Require(); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    if (ok()) {
      std::fprintf(stderr, "rewind: Expected::error() called on a value\n");
      std::abort();
    }
    return std::get<1>(v_);
  }

 private:
  void Require() const {
    if (!ok()) {
      std::fprintf(stderr, "rewind: unchecked error: %s\n", std::get<1>(v_).message.c_str());
      std::abort();
    }
  }
  std::variant<T, Error> v_;
};

// Expected<void>.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  static Status Ok() { return Status(); }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace rw

// Propagate an error from an Expected/Status expression.
#define REWIND_CONCAT_INNER(a, b) a##b
#define REWIND_CONCAT(a, b) REWIND_CONCAT_INNER(a, b)
#define REWIND_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    auto _rw_status = (expr);                        \
    if (!_rw_status.ok()) return _rw_status.error(); \
  } while (0)
#define REWIND_ASSIGN_OR_RETURN(lhs, expr) REWIND_ASSIGN_OR_RETURN_IMPL(REWIND_CONCAT(_rw_v, __LINE__), lhs, expr)
#define REWIND_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.error();                 \
  lhs = std::move(tmp).value()
