// One connection to one Redis node, plain or TLS: hiredis formats the commands (redisFormatCommandArgv) and
// parses the replies (its reply reader); the bytes travel over a Transport (remote/redis_transport.h,
// remote/redis_tls.h) that this code owns, so both kinds of connection share everything above the bytes.
//
// Timeouts: connecting (TCP and TLS handshake together) is bounded by connect_timeout_ms; every wait for the
// server after that (a chunk of the commands written, a chunk of a reply read) by command_timeout_ms. Replies
// are bounded by max_reply_bytes (0: no bound): the bytes of a reply not complete yet are never more.
#pragma once

#include <hiredis.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"
#include "remote/redis_tls.h"
#include "remote/redis_transport.h"

namespace rw::remote {

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisConnection {
 public:
  // TCP to host:port, then the TLS handshake when `tls` is set (verifying the server as `host`).
  static Expected<std::unique_ptr<RedisConnection>> Open(const std::string& host, int port,
                                                         int connect_timeout_ms, int command_timeout_ms,
                                                         int64_t max_reply_bytes, TlsContext* tls);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Queues one command for the next Flush.
  void Append(std::span<const std::string_view> argv);
  // Sends what Append queued.
  Status Flush();
  // The next reply. A protocol error, like an I/O error, leaves the connection unusable.
  Expected<ReplyPtr> Read();
  // Append, Flush and Read: one command, its reply.
  Expected<ReplyPtr> Command(std::span<const std::string_view> argv);

 private:
  RedisConnection(std::unique_ptr<Transport> transport, int command_timeout_ms, int64_t max_reply_bytes);
  Deadline NextDeadline() const;

  std::unique_ptr<Transport> transport_;
  redisReader* reader_;
  int command_timeout_ms_;
  int64_t max_reply_bytes_;
  std::string out_;       // formatted commands not sent yet
  std::vector<char> in_;  // one read's bytes, fed to reader_
};

}  // namespace rw::remote
