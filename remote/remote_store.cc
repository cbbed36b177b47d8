#include "remote/remote_store.h"

#include <algorithm>
#include <chrono>

#include "base/check.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/sha256.h"
#include "memory/store_format.h"

namespace rw::remote {
namespace {

using Command = std::vector<std::string>;

bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

Command SetCommand(std::string key, std::string value, int64_t ttl_s) {
  Command c{"SET", std::move(key), std::move(value)};
  if (ttl_s > 0) {
    c.push_back("EX");
    c.push_back(std::to_string(ttl_s));
  }
  return c;
}

}  // namespace

RemoteStore::RemoteStore(const RedisUrl& url, const RemoteStoreConfig& config, RedisOptions options)
    : cfg_(config),
      key_id_(memory::MacKeyId(config.mac_key)),
      url_(url.ToString()),
      reader_(url, options),
      writer_client_(url, options) {}

Expected<std::unique_ptr<RemoteStore>> RemoteStore::Open(const RedisUrl& url, const RemoteStoreConfig& config,
                                                         RedisOptions options) {
  if (config.page_tokens < 1 || config.ttl_s < 0 || config.queue_bytes < 0 || config.max_fetch_bytes < 1 ||
      config.state_bytes < 0 || config.page_bytes_per_token < 0)
    return Error::InvalidArgument("remote cache: invalid configuration");
  if (config.mac_key.empty() && !config.trust)
    return Error::InvalidArgument(
        "remote cache: no key to authenticate values (--remote-cache-key-file) and Redis not trusted "
        "(--remote-cache-trust)");
  // No reply the store asks for is longer than what one lookup may read (GETRANGE bounds each value).
  if (options.max_reply_bytes == 0) options.max_reply_bytes = config.max_fetch_bytes + 4096;
  if (url.tls && !options.tls) {
    REWIND_ASSIGN_OR_RETURN(options.tls, TlsContext::Create(config.tls));
  }
  std::unique_ptr<RemoteStore> s(new RemoteStore(url, config, options));
  // Not reachable now is not an error: the tier retries with back-off and every miss is computed.
  if (Status ping = s->reader_.Ping(); !ping.ok())
    LOG_WARN("remote cache %s not reachable yet: %s", s->url_.c_str(), ping.error().message.c_str());
  if (config.mac_key.empty())
    LOG_WARN("remote cache %s: values are NOT authenticated (--remote-cache-trust): anyone who can write to this "
             "Redis can plant cache entries every replica serves", s->url_.c_str());
  s->writer_ = std::thread([raw = s.get()] { raw->WriterLoop(); });
  return s;
}

RemoteStore::~RemoteStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

std::vector<int32_t> RemoteStore::PageEnds(int32_t end) const {
  std::vector<int32_t> ends;
  for (int32_t k = cfg_.page_tokens; k < end; k += cfg_.page_tokens) ends.push_back(k);
  if (end > 0) ends.push_back(end);
  return ends;
}

std::vector<uint64_t> RemoteStore::Chains(std::span<const int32_t> tokens,
                                          std::span<const int32_t> ends) const {
  std::vector<uint64_t> out;
  uint64_t h = cfg_.identity;
  int32_t at = 0;
  for (int32_t e : ends) {
    h = HashTokens(tokens.subspan(static_cast<size_t>(at), static_cast<size_t>(e - at)), h);
    at = e;
    out.push_back(h);
  }
  return out;
}

std::string RemoteStore::StateKeyOf(std::span<const int32_t> prefix) const {
  return Key(memory::StateKey(static_cast<int32_t>(prefix.size()), HashTokens(prefix, cfg_.identity)));
}

bool RemoteStore::HasState(std::span<const int32_t> prefix) const {
  if (prefix.empty()) return false;
  const std::string key = StateKeyOf(prefix);
  std::lock_guard<std::mutex> lock(mu_);
  return known_.count(key) > 0;
}

std::vector<int32_t> RemoteStore::MissingPages(std::span<const int32_t> prefix) const {
  const std::vector<int32_t> ends = PageEnds(static_cast<int32_t>(prefix.size()));
  const std::vector<uint64_t> chains = Chains(prefix, ends);
  std::vector<int32_t> missing;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < ends.size(); ++i)
    if (known_.count(Key(memory::PageKey(ends[i], chains[i]))) == 0) missing.push_back(ends[i]);
  return missing;
}

bool RemoteStore::Enqueue(memory::StorePut put) {
  REWIND_CHECK(!put.tokens.empty());
  int64_t bytes = static_cast<int64_t>(put.state.size());
  for (const auto& [e, rows] : put.pages) bytes += static_cast<int64_t>(rows.size());
  const std::vector<int32_t> ends = PageEnds(static_cast<int32_t>(put.tokens.size()));
  const std::vector<uint64_t> chains = Chains(put.tokens, ends);
  std::lock_guard<std::mutex> lock(mu_);
  if (!queue_.empty() && stats_.queued_bytes + bytes > cfg_.queue_bytes) {
    ++stats_.dropped;
    return false;
  }
  // Known from now on, so that the next checkpoint of the conversation sends only its new pages.
  for (const auto& [e, rows] : put.pages) {
    const size_t i = static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), e) - ends.begin());
    REWIND_CHECK(i < ends.size() && ends[i] == e);
    known_.insert(Key(memory::PageKey(e, chains[i])));
  }
  known_.insert(Key(memory::StateKey(ends.back(), chains.back())));
  stats_.queued_bytes += bytes;
  queue_.push_back({std::move(put), bytes});
  cv_.notify_all();
  return true;
}

void RemoteStore::Withdraw(std::span<const int32_t> prefix) {
  if (prefix.empty()) return;
  const std::string key = StateKeyOf(prefix);
  std::lock_guard<std::mutex> lock(mu_);
  if (announced_.erase(key) == 0) return;
  Job job;
  job.put.tokens.assign(prefix.begin(), prefix.end());
  job.withdraw = true;
  queue_.push_back(std::move(job));
  cv_.notify_all();
}

void RemoteStore::Process(Job& job) {
  memory::StorePut& put = job.put;
  if (job.withdraw) {
    // Not removed (Redis down): the marker expires on its own, and lookups wait for it at most cfg_.wait_ms.
    const std::vector<Command> del{{"DEL", AnnounceKey(StateKeyOf(put.tokens))}};
    if (auto r = writer_client_.Pipeline(del); !r.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.write_errors;
    }
    return;
  }
  const int32_t end = static_cast<int32_t>(put.tokens.size());
  const std::vector<int32_t> ends = PageEnds(end);
  const std::vector<uint64_t> chains = Chains(put.tokens, ends);
  const std::span<const int32_t> tokens(put.tokens);
  auto first_of = [&](int32_t e) { return ((e - 1) / cfg_.page_tokens) * cfg_.page_tokens; };
  auto index_of = [&](int32_t e) {
    return static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), e) - ends.begin());
  };
  // Pages another replica wrote already are not sent again (their expiry is renewed instead).
  std::vector<Command> probes;
  for (const auto& [e, rows] : put.pages)
    probes.push_back({"EXISTS", Key(memory::PageKey(e, chains[index_of(e)]))});
  std::vector<Command> writes;
  int64_t sent = 0;
  auto probed = probes.empty() ? Expected<std::vector<RedisReply>>(std::vector<RedisReply>{})
                               : writer_client_.Pipeline(probes);
  Status st = probed.ok() ? Status::Ok() : Status(probed.error());
  for (size_t j = 0; st.ok() && j < put.pages.size(); ++j) {
    const auto& [e, rows] = put.pages[j];
    const size_t i = index_of(e);
    const std::string key = Key(memory::PageKey(e, chains[i]));
    if ((*probed)[j].type == RedisReply::kInteger && (*probed)[j].integer > 0) {
      if (cfg_.ttl_s > 0) writes.push_back({"EXPIRE", key, std::to_string(cfg_.ttl_s)});
      continue;
    }
    const int32_t first = first_of(e);
    std::string value =
        memory::EncodeBlob(cfg_.identity, memory::BlobKind::kPage, first,
                           tokens.subspan(static_cast<size_t>(first), static_cast<size_t>(e - first)),
                           i == 0 ? cfg_.identity : chains[i - 1], rows);
    memory::SealValue(cfg_.mac_key, key, &value);
    writes.push_back(SetCommand(key, std::move(value), cfg_.ttl_s));
    sent += static_cast<int64_t>(writes.back()[2].size());
  }
  if (st.ok()) {
    // The state goes last: a replica that finds it finds its pages (unless Redis evicted one: then a miss).
    const int32_t first = first_of(end);
    const std::string state_key = Key(memory::StateKey(end, chains.back()));
    std::string value =
        memory::EncodeBlob(cfg_.identity, memory::BlobKind::kState, first, tokens.subspan(static_cast<size_t>(first)),
                           ends.size() > 1 ? chains[ends.size() - 2] : cfg_.identity, put.state);
    memory::SealValue(cfg_.mac_key, state_key, &value);
    writes.push_back(SetCommand(state_key, std::move(value), cfg_.ttl_s));
    sent += static_cast<int64_t>(writes.back()[2].size());
    bool announced = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      announced = announced_.erase(state_key) > 0;
    }
    if (announced) writes.push_back({"DEL", AnnounceKey(state_key)});  // delivered: nobody need wait any more
    auto replies = writer_client_.Pipeline(writes);
    if (!replies.ok()) {
      st = replies.error();
    } else {
      for (const RedisReply& r : *replies)
        if (r.type == RedisReply::kError) st = Error::Exhausted("redis refused a write: " + r.str);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (st.ok()) {
    ++stats_.written;
    stats_.written_bytes += static_cast<uint64_t>(sent);
    return;
  }
  // Not written (whole or in part): forget it, so that a later checkpoint sends its pages again.
  for (const auto& [e, rows] : put.pages) known_.erase(Key(memory::PageKey(e, chains[index_of(e)])));
  known_.erase(Key(memory::StateKey(end, chains.back())));
  if (IsPowerOfTwo(++stats_.write_errors))
    LOG_WARN("remote cache %s: checkpoint at %d not written: %s", url_.c_str(), end,
             st.error().ToString().c_str());
}

void RemoteStore::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) {
      idle_cv_.notify_all();
      if (stop_) return;
      continue;
    }
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Process(job);
    lock.lock();
    stats_.queued_bytes -= job.bytes;
    busy_ = false;
    if (known_.size() > (size_t{1} << 20)) known_.clear();  // bounded: forgetting only costs EXISTS probes
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void RemoteStore::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void RemoteStore::WaitForAnnounced(const std::vector<std::string>& state_keys,
                                   const std::function<bool(size_t)>& coming,
                                   std::unique_lock<std::mutex>& read_lock, std::vector<char>& stored,
                                   RemoteFetch& out) {
  if (cfg_.wait_ms <= 0) return;
  // The deepest candidate another replica announced, if deeper than every stored one.
  size_t c = state_keys.size();
  for (size_t i = state_keys.size(); i-- > 0 && !stored[i];) {
    if (!coming(i)) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (announced_.count(state_keys[i]) == 0) {  // this replica's own request in flight: its RAM will have it
      c = i;
      break;
    }
  }
  if (c == state_keys.size()) return;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(cfg_.wait_ms);
  const std::string marker_key = AnnounceKey(state_keys[c]);
  const std::vector<Command> poll{{"EXISTS", state_keys[c]}, {"GETRANGE", marker_key, "0", "127"}};
  auto step = std::chrono::milliseconds(2);
  bool served = false;
  while (std::chrono::steady_clock::now() < deadline) {
    read_lock.unlock();  // other requests' lookups go on meanwhile
    std::this_thread::sleep_for(step);
    step = std::min(step * 2, std::chrono::milliseconds(50));
    read_lock.lock();
    auto r = reader_.Pipeline(poll);
    if (!r.ok()) {
      out.error = true;
      break;
    }
    if ((*r)[0].type == RedisReply::kInteger && (*r)[0].integer > 0) {
      stored[c] = 1;
      served = true;
      break;
    }
    if ((*r)[1].type != RedisReply::kString || (*r)[1].str != AnnounceValue(marker_key)) break;  // withdrawn
  }
  out.waited_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.waits;
  stats_.waits_served += served ? 1 : 0;
}

RemoteStats RemoteStore::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  RemoteStats s = stats_;
  s.redirects_refused = reader_.redirects_refused() + writer_client_.redirects_refused();
  s.tls_failures = reader_.tls_failures();  // the writer shares the reader's TLS context
  return s;
}

std::string RemoteStore::AnnounceValue(const std::string& announce_key) const {
  return DigestHex(HmacSha256(cfg_.mac_key, "announce " + announce_key));
}

int64_t RemoteStore::ExpectedValueBytes(bool state, int32_t first, int32_t end) const {
  const int64_t payload = state ? cfg_.state_bytes : cfg_.page_bytes_per_token * (end - first);
  if (payload == 0) return 0;
  constexpr int64_t kHead = 64 + 8;  // memory/store_format.h: header, then the tokens, then a checksum
  return kHead + int64_t{4} * (end - first) + payload + static_cast<int64_t>(memory::kValueMacBytes);
}

void RemoteStore::Reject(const std::string& key, const Error& why, bool oversized) {
  uint64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = oversized ? ++stats_.oversized : ++stats_.unauthenticated;
  }
  if (IsPowerOfTwo(n))
    LOG_WARN("remote cache %s: %s %s rejected and deleted (%llu so far): %s", url_.c_str(),
             oversized ? "oversized value" : "unauthenticated value", key.c_str(), static_cast<unsigned long long>(n),
             why.message.c_str());
  (void)reader_.Delete(key);
}

RemoteFetch RemoteStore::Fetch(std::span<const int32_t> prompt, std::span<const int32_t> candidates,
                               int32_t after, int32_t first_page, int32_t announce) {
  const auto t0 = std::chrono::steady_clock::now();
  RemoteFetch out;
  std::vector<int32_t> cands;
  for (int32_t c : candidates)
    if (c > after && c < static_cast<int32_t>(prompt.size())) cands.push_back(c);
  std::sort(cands.begin(), cands.end());
  cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
  auto finish = [&](bool hit) {
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.lookups;
    if (out.error) ++stats_.errors;
    (hit ? stats_.hits : stats_.misses) += 1;
    stats_.fetched_bytes += static_cast<uint64_t>(out.bytes);
    stats_.fetch_seconds += out.seconds;
    if (!hit) {  // what was read stays counted; nothing of it is usable
      out.end = out.first_page = 0;
      out.state.clear();
      out.pages.clear();
    }
    return out;
  };
  // The announcement rides in the probe's round trip; a state known here (queued or written) needs none.
  std::string announce_key;
  if (announce > 0 && announce < static_cast<int32_t>(prompt.size())) {
    const std::string key = StateKeyOf(prompt.subspan(0, static_cast<size_t>(announce)));
    std::lock_guard<std::mutex> lock(mu_);
    if (known_.count(key) == 0 && announced_.insert(key).second) {
      announce_key = key;
      ++stats_.announced;
    }
  }
  if (cands.empty() && announce_key.empty()) return finish(false);
  const std::vector<uint64_t> chains = Chains(prompt, cands);  // c(n) of every candidate, ascending
  std::vector<std::string> state_keys;
  for (size_t i = 0; i < cands.size(); ++i) state_keys.push_back(Key(memory::StateKey(cands[i], chains[i])));
  std::unique_lock<std::mutex> read_lock(read_mu_);
  std::vector<Command> probes;
  for (const std::string& k : state_keys) {
    probes.push_back({"EXISTS", k});
    probes.push_back({"GETRANGE", AnnounceKey(k), "0", "127"});  // a marker is 64 hex digits
  }
  if (!announce_key.empty())
    probes.push_back(
        SetCommand(AnnounceKey(announce_key), AnnounceValue(AnnounceKey(announce_key)), cfg_.announce_ttl_s));
  auto found = reader_.Pipeline(probes);
  if (!found.ok()) {
    if (!announce_key.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      announced_.erase(announce_key);
    }
    out.error = true;
    return finish(false);
  }
  auto yes = [&](size_t j) { return (*found)[j].type == RedisReply::kInteger && (*found)[j].integer > 0; };
  // A marker counts only with its MAC (one planted without the key would make every lookup wait).
  auto marker = [&](size_t i) {
    const RedisReply& r = (*found)[2 * i + 1];
    if (r.type != RedisReply::kString || r.str.empty()) return false;
    const std::string key = AnnounceKey(state_keys[i]);
    if (r.str == AnnounceValue(key)) return true;
    Reject(key, Error::Corrupt("announcement marker MAC mismatch"), false);
    return false;
  };
  std::vector<char> stored(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) stored[i] = yes(2 * i);
  WaitForAnnounced(state_keys, marker, read_lock, stored, out);
  for (size_t ci = cands.size(); ci-- > 0;) {
    if (!stored[ci]) continue;
    const int32_t end = cands[ci];
    const std::vector<int32_t> ends = PageEnds(end);
    const std::vector<uint64_t> page_chains = Chains(prompt.subspan(0, static_cast<size_t>(end)), ends);
    const size_t from =
        static_cast<size_t>(std::clamp<int32_t>(first_page, 0, static_cast<int32_t>(ends.size())));
    std::vector<std::string> keys{Key(memory::StateKey(end, chains[ci]))};
    for (size_t i = from; i < ends.size(); ++i) keys.push_back(Key(memory::PageKey(ends[i], page_chains[i])));
    // Each value is read with GETRANGE up to one byte past the size this cache expects of it, so a planted
    // oversized value costs no more than a genuine one; the lookup as a whole stays under max_fetch_bytes.
    auto index_of = [&](size_t k) { return k == 0 ? ends.size() - 1 : from + k - 1; };
    std::vector<int64_t> bound(keys.size());
    int64_t total = 0;
    for (size_t k = 0; k < keys.size(); ++k) {
      const int32_t e = ends[index_of(k)];
      bound[k] = ExpectedValueBytes(k == 0, ((e - 1) / cfg_.page_tokens) * cfg_.page_tokens, e);
      if (bound[k] == 0) bound[k] = std::max<int64_t>(1, cfg_.max_fetch_bytes / static_cast<int64_t>(keys.size()));
      total += bound[k];
    }
    if (total > cfg_.max_fetch_bytes) {  // too big to fetch: a shallower candidate may fit
      std::lock_guard<std::mutex> lock(mu_);
      if (IsPowerOfTwo(++stats_.capped))
        LOG_WARN("remote cache %s: checkpoint at %d needs %lld B, over --remote-cache-max-fetch (%lld B)",
                 url_.c_str(), end, static_cast<long long>(total), static_cast<long long>(cfg_.max_fetch_bytes));
      continue;
    }
    std::vector<Command> reads;
    for (size_t k = 0; k < keys.size(); ++k) reads.push_back({"GETRANGE", keys[k], "0", std::to_string(bound[k])});
    auto values = reader_.Pipeline(reads);
    if (!values.ok()) {
      out.error = true;
      return finish(false);
    }
    for (const auto& v : *values) out.bytes += static_cast<int64_t>(v.str.size());
    // Check every value against its MAC and the prompt; a value that fails is deleted and this state skipped.
    bool usable = true;
    std::vector<std::string> payloads;
    // Every value is checked, also after a bad one: each bad value is deleted now, so the writers of the next
    // checkpoints (which skip values that exist) write it again and the path heals after this one miss.
    for (size_t k = 0; k < keys.size(); ++k) {
      const RedisReply& reply = (*values)[k];
      if (reply.type != RedisReply::kString || reply.str.empty()) {  // expired or evicted since the probe
        usable = false;
        continue;
      }
      if (static_cast<int64_t>(reply.str.size()) > bound[k]) {
        Reject(keys[k], Error::OutOfRange("value larger than " + std::to_string(bound[k]) + " B"), true);
        usable = false;
        continue;
      }
      auto sealed = memory::OpenSealedValue(cfg_.mac_key, keys[k], reply.str);
      if (!sealed.ok()) {
        Reject(keys[k], sealed.error(), false);
        usable = false;
        continue;
      }
      const bool is_state = k == 0;
      const size_t i = index_of(k);
      const int32_t e = ends[i];
      const int32_t first = ((e - 1) / cfg_.page_tokens) * cfg_.page_tokens;
      const uint64_t parent = i == 0 ? cfg_.identity : page_chains[i - 1];
      auto blob = memory::DecodeBlob(*sealed, cfg_.identity,
                                     is_state ? memory::BlobKind::kState : memory::BlobKind::kPage, e,
                                     page_chains[i]);
      if (blob.ok() && (blob->first != first || blob->parent != parent ||
                        !std::equal(blob->tokens.begin(), blob->tokens.end(), prompt.begin() + first)))
        blob = Error::Corrupt("tokens differ from the prompt (hash collision)");
      if (!blob.ok()) {
        usable = false;
        LOG_WARN("remote cache %s: value %s rejected and deleted: %s", url_.c_str(), keys[k].c_str(),
                 blob.error().ToString().c_str());
        (void)reader_.Delete(keys[k]);
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.corrupt;
        continue;
      }
      if (usable) payloads.push_back(std::move(blob->payload));
    }
    if (!usable) continue;
    out.end = end;
    out.first_page = static_cast<int32_t>(from);
    out.state = std::move(payloads[0]);
    out.pages.assign(std::make_move_iterator(payloads.begin() + 1), std::make_move_iterator(payloads.end()));
    {
      std::lock_guard<std::mutex> lock(mu_);  // seen: this replica need not send these pages again
      for (size_t i = from; i < ends.size(); ++i)
        known_.insert(Key(memory::PageKey(ends[i], page_chains[i])));
    }
    return finish(true);
  }
  return finish(false);
}

}  // namespace rw::remote
