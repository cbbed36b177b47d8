// Minimal leveled logging to stderr: one line per call, with a timestamp.
#pragma once

#include <cstdarg>

namespace rw {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void LogF(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace rw

#define LOG_DEBUG(...) ::rw::LogF(::rw::LogLevel::kDebug, __VA_ARGS__)
#define LOG_INFO(...) ::rw::LogF(::rw::LogLevel::kInfo, __VA_ARGS__)
#define LOG_WARN(...) ::rw::LogF(::rw::LogLevel::kWarn, __VA_ARGS__)
#define LOG_ERROR(...) ::rw::LogF(::rw::LogLevel::kError, __VA_ARGS__)
