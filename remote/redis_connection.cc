#include "remote/redis_connection.h"

#include <algorithm>
#include <chrono>

namespace rw::remote {
namespace {

constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kWriteChunk = 1 << 20;  // each chunk gets its own command timeout

}  // namespace

Expected<std::unique_ptr<RedisConnection>> RedisConnection::Open(const std::string& host, int port,
                                                                 int connect_timeout_ms,
                                                                 int command_timeout_ms,
                                                                 int64_t max_reply_bytes, TlsContext* tls) {
  const Deadline deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(connect_timeout_ms);
  REWIND_ASSIGN_OR_RETURN(Socket socket, ConnectTcp(host, port, deadline));
  std::unique_ptr<Transport> transport;
  if (tls) {
    REWIND_ASSIGN_OR_RETURN(transport, tls->Handshake(std::move(socket), host, deadline));
  } else {
    transport = MakePlainTransport(std::move(socket));
  }
  return std::unique_ptr<RedisConnection>(
      new RedisConnection(std::move(transport), command_timeout_ms, max_reply_bytes));
}

RedisConnection::RedisConnection(std::unique_ptr<Transport> transport, int command_timeout_ms,
                                 int64_t max_reply_bytes)
    : transport_(std::move(transport)),
      reader_(redisReaderCreate()),
      command_timeout_ms_(command_timeout_ms),
      max_reply_bytes_(max_reply_bytes) {}

RedisConnection::~RedisConnection() {
  if (reader_) redisReaderFree(reader_);
}

Deadline RedisConnection::NextDeadline() const {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(command_timeout_ms_);
}

void RedisConnection::Append(std::span<const std::string_view> argv) {
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (std::string_view a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int n = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), args.data(), lens.data());
  if (n > 0) out_.append(cmd, static_cast<size_t>(n));
  redisFreeCommand(cmd);
}

Status RedisConnection::Flush() {
  std::string_view rest = out_;
  while (!rest.empty()) {
    const std::string_view chunk = rest.substr(0, kWriteChunk);
    if (Status s = transport_->WriteAll(chunk, NextDeadline()); !s.ok()) {
      out_.clear();
      return s;
    }
    rest.remove_prefix(chunk.size());
  }
  out_.clear();
  return Status::Ok();
}

Expected<ReplyPtr> RedisConnection::Read() {
  if (!reader_) return Error::Internal("out of memory");
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK)
      return Error::Unavailable(std::string("protocol error: ") + reader_->errstr);
    if (raw) return ReplyPtr(static_cast<redisReply*>(raw));
    // What the reader holds now is the start of one reply (complete ones were taken above).
    if (max_reply_bytes_ > 0 && reader_->len - reader_->pos > static_cast<size_t>(max_reply_bytes_))
      return Error::Unavailable("a reply longer than " + std::to_string(max_reply_bytes_) +
                                " bytes (the cap of one reply): not read further");
    in_.resize(kReadChunk);
    REWIND_ASSIGN_OR_RETURN(const size_t n, transport_->Read(in_, NextDeadline()));
    if (redisReaderFeed(reader_, in_.data(), n) != REDIS_OK)
      return Error::Unavailable(std::string("protocol error: ") + reader_->errstr);
  }
}

Expected<ReplyPtr> RedisConnection::Command(std::span<const std::string_view> argv) {
  Append(argv);
  REWIND_RETURN_IF_ERROR(Flush());
  return Read();
}

}  // namespace rw::remote
