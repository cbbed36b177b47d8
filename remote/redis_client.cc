#include "remote/redis_client.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "base/check.h"
#include "base/log.h"
#include "remote/redis_connection.h"

namespace rw::remote {
namespace {

constexpr int kSlots = 16384;

Expected<int> ParsePort(std::string_view s, std::string_view what) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0 || v > 65535) {
    return Error::InvalidArgument("bad " + std::string(what) + " '" + std::string(s) + "' in redis URL");
  }
  return v;
}

}  // namespace

std::string RedisUrl::ToString() const {
  return (tls ? "rediss://" : "redis://") + host + ":" + std::to_string(port) + (db ? "/" + std::to_string(db) : "");
}

Expected<RedisUrl> ParseRedisUrl(std::string_view url) {
  RedisUrl out;
  std::string_view rest;
  if (url.starts_with("redis://")) {
    rest = url.substr(8);
  } else if (url.starts_with("rediss://")) {
    rest = url.substr(9);
    out.tls = true;
  } else {
    return Error::InvalidArgument("remote cache URL must look like redis://HOST:PORT[/DB] (or rediss:// for TLS), "
                                  "got '" + std::string(url) + "'");
  }
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view auth = rest.substr(0, at);
    if (size_t colon = auth.find(':'); colon != std::string_view::npos) auth = auth.substr(colon + 1);
    out.password = std::string(auth);
    rest = rest.substr(at + 1);
  }
  std::string_view hostport = rest;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      REWIND_ASSIGN_OR_RETURN(out.db, ParsePort(db, "database"));
    }
  }
  if (size_t colon = hostport.rfind(':'); colon != std::string_view::npos) {
    REWIND_ASSIGN_OR_RETURN(out.port, ParsePort(hostport.substr(colon + 1), "port"));
    hostport = hostport.substr(0, colon);
  }
  if (hostport.empty()) return Error::InvalidArgument("no host in redis URL '" + std::string(url) + "'");
  out.host = std::string(hostport);
  return out;
}

int KeySlot(std::string_view key) {
  if (size_t open = key.find('{'); open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  uint16_t crc = 0;  // CRC16/XMODEM: polynomial 0x1021, initial 0, no reflection
  for (unsigned char c : key) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : crc << 1;
  }
  return crc % kSlots;
}

struct RedisClient::Node {
  std::string host;
  int port = 0;
  std::unique_ptr<RedisConnection> conn;  // null: not connected
  void Drop() { conn.reset(); }
};

RedisClient::RedisClient(RedisUrl url, RedisOptions options) : url_(std::move(url)), options_(std::move(options)) {
  REWIND_CHECK(!url_.tls || options_.tls);  // a rediss:// URL needs a TLS context (TlsContext::Create)
}
RedisClient::~RedisClient() = default;

bool RedisClient::backing_off() const { return down_ && std::chrono::steady_clock::now() < retry_at_; }

Status RedisClient::Gate() const {
  if (backing_off())
    return Error::Unavailable("redis at " + url_.ToString() + " is unavailable (backing off)");
  return Status::Ok();
}

Status RedisClient::Fail(Error error) {
  if (!down_) {
    LOG_WARN("remote cache %s: %s; retrying with back-off", url_.ToString().c_str(), error.message.c_str());
    backoff_ms_ = options_.backoff_min_ms;
  } else {
    backoff_ms_ = std::min(options_.backoff_max_ms, std::max(options_.backoff_min_ms, backoff_ms_ * 2));
  }
  down_ = true;
  retry_at_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms_);
  // The topology may have changed (a node replaced, a cluster resharded): learn it again on the next try.
  for (auto& [name, node] : nodes_) node->Drop();
  topology_known_ = false;
  return error;
}

void RedisClient::Succeeded() {
  if (down_) LOG_INFO("remote cache %s: reachable again", url_.ToString().c_str());
  down_ = false;
  backoff_ms_ = 0;
}

Expected<RedisConnection*> RedisClient::Connect(Node& node) {
  if (node.conn) return node.conn.get();
  const std::string where = node.host + ":" + std::to_string(node.port);
  auto conn = RedisConnection::Open(node.host, node.port, options_.connect_timeout_ms, options_.command_timeout_ms,
                                    options_.max_reply_bytes, url_.tls ? options_.tls.get() : nullptr);
  if (!conn.ok()) return Error::Unavailable("cannot connect to " + where + ": " + conn.error().message);
  auto hello = [&](std::vector<std::string_view> args) -> Status {
    auto r = (*conn)->Command(args);
    if (!r.ok()) return Error::Unavailable(where + ": " + r.error().message);
    if ((*r)->type == REDIS_REPLY_ERROR)
      return Error::Unavailable(std::string(args[0]) + ": " + std::string((*r)->str, (*r)->len));
    return Status::Ok();
  };
  const std::string db = std::to_string(url_.db);
  Status s = url_.password.empty() ? Status::Ok() : hello({"AUTH", url_.password});
  if (s.ok() && url_.db != 0) s = hello({"SELECT", db});
  REWIND_RETURN_IF_ERROR(s);
  node.conn = std::move(conn).value();
  return node.conn.get();
}

Status RedisClient::LoadSlots(RedisConnection& conn) {
  const std::string_view cmd[] = {"CLUSTER", "SLOTS"};
  REWIND_ASSIGN_OR_RETURN(ReplyPtr r, conn.Command(cmd));
  if (r->type == REDIS_REPLY_ERROR) {  // "ERR This instance has cluster support disabled"
    cluster_ = false;
    return Status::Ok();
  }
  if (r->type != REDIS_REPLY_ARRAY) return Error::Corrupt("unexpected reply to CLUSTER SLOTS");
  if (url_.db != 0) return Error::InvalidArgument("a Redis Cluster has only database 0");
  cluster_ = true;
  slots_.assign(kSlots, nullptr);
  const std::string seed = url_.host + ":" + std::to_string(url_.port);
  members_.clear();
  if (auto it = nodes_.find(seed); it != nodes_.end()) members_[seed] = it->second.get();
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* range = r->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) continue;
    const redisReply* master = range->element[2];
    if (master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
        master->element[0]->type != REDIS_REPLY_STRING) {
      continue;
    }
    std::string host(master->element[0]->str, master->element[0]->len);
    if (host.empty()) host = url_.host;  // a node that does not know its own address
    int port = static_cast<int>(master->element[1]->integer);
    std::string name = host + ":" + std::to_string(port);
    auto& node = nodes_[name];
    if (!node) {
      node = std::make_unique<Node>();
      node->host = host;
      node->port = port;
    }
    members_[name] = node.get();
    long long lo = range->element[0]->integer, hi = range->element[1]->integer;
    for (long long s = std::max(0LL, lo); s <= std::min<long long>(kSlots - 1, hi); ++s)
      slots_[s] = node.get();
  }
  return Status::Ok();
}

Status RedisClient::EnsureTopology() {
  if (topology_known_) return Status::Ok();
  std::string name = url_.host + ":" + std::to_string(url_.port);
  auto& seed = nodes_[name];
  if (!seed) {
    seed = std::make_unique<Node>();
    seed->host = url_.host;
    seed->port = url_.port;
  }
  REWIND_ASSIGN_OR_RETURN(RedisConnection * conn, Connect(*seed));
  if (Status s = LoadSlots(*conn); !s.ok()) {
    seed->Drop();
    return Error{s.error().kind, "redis " + name + ": " + s.error().message};
  }
  single_ = cluster_ ? nullptr : seed.get();
  if (!cluster_) members_ = {{name, seed.get()}};
  topology_known_ = true;
  return Status::Ok();
}

RedisClient::Node* RedisClient::MapNode(std::string_view target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string_view::npos) return nullptr;
  std::string host(target.substr(0, colon));
  if (host.empty()) host = url_.host;  // "MOVED 1 :7001": the host the client already talks to
  int port = 0;
  const std::string_view p = target.substr(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || end != p.data() + p.size()) return nullptr;
  auto it = members_.find(host + ":" + std::to_string(port));
  return it == members_.end() ? nullptr : it->second;
}

Expected<RedisClient::Node*> RedisClient::NodeFor(std::string_view key) {
  REWIND_RETURN_IF_ERROR(EnsureTopology());
  if (!cluster_) return single_;
  Node* n = slots_[KeySlot(key)];
  if (!n) return Error::Unavailable("no cluster node serves the slot of key " + std::string(key));
  return n;
}

Expected<std::vector<RedisClient::Reply>> RedisClient::RunOn(Node& node, std::span<const Argv> commands,
                                                             bool asking) {
  REWIND_ASSIGN_OR_RETURN(RedisConnection * conn, Connect(node));
  size_t expected = commands.size();
  const std::string_view asking_cmd[] = {"ASKING"};
  for (const Argv& cmd : commands) {
    if (asking) {
      conn->Append(asking_cmd);
      ++expected;
    }
    conn->Append(cmd);
  }
  Status io = conn->Flush();
  std::vector<Reply> out;
  for (size_t i = 0; io.ok() && i < expected; ++i) {
    auto got = conn->Read();
    if (!got.ok()) {
      io = got.error();
      break;
    }
    ReplyPtr r = std::move(got).value();
    if (asking && i % 2 == 0) continue;  // the ASKING acknowledgements
    Reply reply;
    switch (r->type) {
      case REDIS_REPLY_STRING:
        reply.type = Reply::kString;
        break;
      case REDIS_REPLY_INTEGER:
        reply.type = Reply::kInteger;
        break;
      case REDIS_REPLY_STATUS:
        reply.type = Reply::kStatus;
        break;
      case REDIS_REPLY_ERROR:
        reply.type = Reply::kError;
        break;
      default:
        reply.type = Reply::kNil;
        break;
    }
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS) {
      reply.str.assign(r->str, r->len);
    }
    reply.integer = r->integer;
    out.push_back(std::move(reply));
  }
  if (!io.ok()) {
    node.Drop();
    return Error::Unavailable("redis " + node.host + ":" + std::to_string(node.port) + ": " + io.error().message);
  }
  return out;
}

Expected<std::vector<RedisClient::Reply>> RedisClient::Run(std::string_view key,
                                                           std::span<const Argv> commands) {
  REWIND_RETURN_IF_ERROR(Gate());
  auto node = NodeFor(key);
  if (!node.ok()) return Fail(node.error()).error();
  auto replies = RunOn(**node, commands, false);
  if (!replies.ok()) return Fail(replies.error()).error();
  // A cluster moved the slot: "MOVED slot host:port" (permanent) or "ASK slot host:port" (during migration).
  for (const Reply& r : *replies) {
    if (r.type != Reply::kError) continue;
    bool moved = r.str.rfind("MOVED ", 0) == 0, ask = r.str.rfind("ASK ", 0) == 0;
    if (!moved && !ask) {
      if (r.str.rfind("OOM", 0) == 0) continue;  // maxmemory with noeviction: a per-command failure
      return Fail(Error::Unavailable("redis: " + r.str)).error();
    }
    const std::string target(std::string_view(r.str).substr(r.str.rfind(' ') + 1));
    Node* dest = MapNode(target);
    if (!dest && cluster_) {  // a resharding may have added a node: read the slot map once more
      topology_known_ = false;
      if (Status st = EnsureTopology(); !st.ok()) return Fail(st.error()).error();
      dest = MapNode(target);
    }
    if (!dest) {
      const uint64_t n = ++redirects_refused_;
      if ((n & (n - 1)) == 0)  // the 1st, 2nd, 4th... of them
        LOG_WARN("remote cache %s: refused a redirect to %s: not a node of the cluster's slot map (%llu refused)",
                 url_.ToString().c_str(), target.c_str(), static_cast<unsigned long long>(n));
      return Fail(Error::Unavailable("redis redirect to " + target + " refused: not in the cluster's slot map"))
          .error();
    }
    if (moved) topology_known_ = false;  // relearn the whole map on the next call
    replies = RunOn(*dest, commands, ask);
    if (!replies.ok()) return Fail(replies.error()).error();
    break;
  }
  Succeeded();
  return replies;
}

Expected<std::optional<std::string>> RedisClient::Get(std::string_view key) {
  Argv cmd{"GET", key};
  REWIND_ASSIGN_OR_RETURN(auto replies, Run(key, std::span(&cmd, 1)));
  Reply& r = replies[0];
  if (r.type == Reply::kNil) return std::optional<std::string>();
  if (r.type != Reply::kString) return Error::Corrupt("unexpected reply to GET: " + r.str);
  return std::optional<std::string>(std::move(r.str));
}

Expected<std::vector<RedisReply>> RedisClient::Pipeline(std::span<const std::vector<std::string>> commands) {
  std::vector<Reply> out(commands.size());
  REWIND_RETURN_IF_ERROR(Gate());
  if (Status s = EnsureTopology(); !s.ok()) return Fail(s.error()).error();
  // Group by the node that serves each key's slot, one pipeline per node.
  std::map<Node*, std::vector<size_t>> groups;
  for (size_t i = 0; i < commands.size(); ++i) {
    REWIND_CHECK(commands[i].size() >= 2);
    auto node = NodeFor(commands[i][1]);
    if (!node.ok()) return Fail(node.error()).error();
    groups[*node].push_back(i);
  }
  for (auto& [node, idx] : groups) {
    std::vector<Argv> cmds;
    for (size_t i : idx) cmds.emplace_back(commands[i].begin(), commands[i].end());
    // Keys of one group share a node, not necessarily a slot; a MOVED for any of them re-runs the group
    // there.
    REWIND_ASSIGN_OR_RETURN(auto replies, Run(commands[idx[0]][1], cmds));
    for (size_t j = 0; j < idx.size(); ++j) {
      Reply& r = replies[j];
      if (r.type == Reply::kError && (r.str.rfind("MOVED ", 0) == 0 || r.str.rfind("ASK ", 0) == 0)) {
        // A key of another slot after a redirect: run it alone.
        std::vector<Argv> one{cmds[j]};
        REWIND_ASSIGN_OR_RETURN(auto again, Run(commands[idx[j]][1], one));
        r = std::move(again[0]);
      }
      out[idx[j]] = std::move(r);
    }
  }
  return out;
}

Expected<std::vector<std::optional<std::string>>> RedisClient::MultiGet(std::span<const std::string> keys) {
  std::vector<std::vector<std::string>> cmds;
  for (const std::string& k : keys) cmds.push_back({"GET", k});
  REWIND_ASSIGN_OR_RETURN(auto replies, Pipeline(cmds));
  std::vector<std::optional<std::string>> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (replies[i].type == Reply::kString) {
      out[i] = std::move(replies[i].str);
    } else if (replies[i].type != Reply::kNil) {
      return Error::Corrupt("unexpected reply to GET: " + replies[i].str);
    }
  }
  return out;
}

Status RedisClient::Put(std::string_view key, std::string_view value, int64_t ttl_s) {
  std::string ttl = std::to_string(ttl_s);
  Argv cmd = ttl_s > 0 ? Argv{"SET", key, value, "EX", ttl} : Argv{"SET", key, value};
  REWIND_ASSIGN_OR_RETURN(auto replies, Run(key, std::span(&cmd, 1)));
  if (replies[0].type == Reply::kError) return Error::Exhausted("redis refused the write: " + replies[0].str);
  return Status::Ok();
}

Expected<bool> RedisClient::Exists(std::string_view key) {
  Argv cmd{"EXISTS", key};
  REWIND_ASSIGN_OR_RETURN(auto replies, Run(key, std::span(&cmd, 1)));
  return replies[0].type == Reply::kInteger && replies[0].integer > 0;
}

Status RedisClient::Delete(std::string_view key) {
  Argv cmd{"DEL", key};
  REWIND_ASSIGN_OR_RETURN(auto replies, Run(key, std::span(&cmd, 1)));
  return Status::Ok();
}

Status RedisClient::Ping() {
  Argv cmd{"PING"};
  REWIND_ASSIGN_OR_RETURN(auto replies, Run("", std::span(&cmd, 1)));
  return Status::Ok();
}

}  // namespace rw::remote
