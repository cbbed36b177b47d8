// serve_bench: N concurrent streaming chat clients against a running server; prints requests/s, tokens/s and
// time-to-first-token and inter-token latency percentiles. Numbers only, no assertions.
//   serve_bench --url http://127.0.0.1:8080 --clients 8 --requests 4 --max-tokens 64
// --long-prompt N adds one client sending an N-word prompt while the others stream (its numbers are printed on
// their own line), to see how a long prefill affects the running streams' inter-token latency.
// --prompt-words N makes every request's user message N words of its own (seeded by --seed, the client and the
// request), so no two requests share more than the chat template's first tokens: scripts/bench-vs-llama-server.sh.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/flags.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Sample {
  bool ok = false;
  double ttft_ms = 0, total_ms = 0;
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  std::vector<double> itl_ms;  // gaps between streamed chunks after the first
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

Sample OneRequest(httplib::Client& client, const json& body) {
  Sample s;
  auto t0 = Clock::now();
  std::string buffer;
  bool first = true;
  double last = 0;
  json usage;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Accept", "text/event-stream"}, {"Content-Type", "application/json"}};
  req.body = body.dump();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      json j = json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("choices") && !j["choices"].empty()) {
        const double now = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (first) s.ttft_ms = now;
        else s.itl_ms.push_back(now - last);
        last = now;
        first = false;
      }
      if (j.contains("usage") && j["usage"].is_object()) usage = j["usage"];
    }
    return true;
  };
  auto r = client.send(req);
  s.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  s.ok = r && r->status == 200 && usage.is_object();
  if (s.ok) {
    s.prompt_tokens = usage.value("prompt_tokens", 0);
    s.completion_tokens = usage.value("completion_tokens", 0);
    if (usage.contains("prompt_tokens_details"))
      s.cached_tokens = usage["prompt_tokens_details"].value("cached_tokens", 0);
  } else if (r) {
    std::fprintf(stderr, "serve_bench: HTTP %d: %.200s\n", r->status, r->body.c_str());
  } else {
    std::fprintf(stderr, "serve_bench: %s\n", httplib::to_string(r.error()).c_str());
  }
  return s;
}

// `n` words drawn from a small English word list by a generator seeded with (seed, client, request): a prompt no
// other request shares (about one token per word with a BPE vocabulary).
std::string DistinctWords(int n, uint64_t seed, int client, int request) {
  static const char* const kWords[] = {
      "the",   "river",  "quiet",  "stone",  "light",  "under",  "garden", "morning", "carried", "window",
      "paper", "little", "across", "bright", "house",  "winter", "people", "found",   "ocean",   "silver",
      "road",  "before", "music",  "yellow", "forest", "simple", "answer", "number",  "market",  "travel",
      "cold",  "village", "letter", "bridge", "summer", "engine", "table", "history", "mountain", "careful"};
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ (uint64_t(client) << 32) ^ uint64_t(request) * 0xBF58476D1CE4E5B9ULL;
  std::string text;
  for (int w = 0; w < n; ++w) {
    x += 0x9E3779B97F4A7C15ULL;  // splitmix64
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    if (w > 0) text += ' ';
    text += kWords[z % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return text;
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "http://127.0.0.1:8080", prompt = "Write a short story about a lighthouse keeper.",
              api_key;
  int clients = 8, requests = 4, max_tokens = 64, long_prompt = 0, prompt_words = 0, seed = 1;
  double temperature = 0;
  bool shared_prefix = false, ignore_eos = false;
  rw::FlagSet flags("serve_bench",
                    "concurrent streaming chat clients against a running rewind (or any OpenAI) server");
  flags.Add("url", 0, &url, "server base URL");
  flags.Add("clients", 'n', &clients, "concurrent clients");
  flags.Add("requests", 'r', &requests, "requests per client");
  flags.Add("max-tokens", 0, &max_tokens, "tokens to generate per request");
  flags.Add("prompt", 'p', &prompt, "user message (each client prefixes its number unless --shared-prefix)");
  flags.Add("shared-prefix", 0, &shared_prefix, "all clients send the same prompt (prefix-cache friendly)");
  flags.Add("temperature", 0, &temperature, "sampling temperature");
  flags.Add("api-key", 0, &api_key, "bearer token");
  flags.Add("ignore-eos", 0, &ignore_eos, "generate max-tokens tokens whatever the model says (rewind, llama-server)");
  flags.Add("prompt-words", 0, &prompt_words,
            "user message of N words distinct per request (replaces --prompt; 0 = use --prompt)");
  flags.Add("seed", 0, &seed, "seed of the --prompt-words text (change it between runs against one cache)");
  flags.Add("long-prompt", 0, &long_prompt, "words of one extra long prompt sent while the clients stream (0 = none)");
  auto st = flags.Parse(argc, argv);
  if (!st.ok() || flags.help_requested()) {
    if (!st.ok()) std::fprintf(stderr, "%s\n", st.error().message.c_str());
    std::printf("%s", flags.Help().c_str());
    return st.ok() ? 0 : 2;
  }
  std::mutex mu;
  std::vector<Sample> samples;
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  auto request_body = [&](const std::string& text, int n) {
    json body = {{"model", "bench"},       {"messages", {{{"role", "user"}, {"content", text}}}},
                 {"max_tokens", n},        {"temperature", temperature},
                 {"stream", true},         {"stream_options", {{"include_usage", true}}}};
    if (ignore_eos) body["ignore_eos"] = true;
    return body;
  };
  Sample long_sample;
  if (long_prompt > 0) {
    threads.emplace_back([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the streams are running by then
      httplib::Client client(url);
      client.set_read_timeout(600);
      if (!api_key.empty()) client.set_bearer_token_auth(api_key);
      std::string text = "Long request:";
      for (int w = 0; w < long_prompt; ++w) text += " word" + std::to_string(w % 997);
      long_sample = OneRequest(client, request_body(text, 4));
    });
  }
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client(url);
      client.set_read_timeout(600);
      if (!api_key.empty()) client.set_bearer_token_auth(api_key);
      for (int i = 0; i < requests; ++i) {
        const std::string head = "Client " + std::to_string(c) + ", request " + std::to_string(i) + ": ";
        std::string text = prompt_words > 0 ? head + DistinctWords(prompt_words, static_cast<uint64_t>(seed), c, i)
                           : shared_prefix  ? prompt
                                            : head + prompt;
        Sample s = OneRequest(client, request_body(text, max_tokens));
        std::lock_guard<std::mutex> lock(mu);
        samples.push_back(s);
      }
    });
  }
  for (auto& t : threads) t.join();
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  int ok = 0;
  int64_t gen = 0, prompt_tokens = 0, cached = 0;
  std::vector<double> ttft, total, itl;
  for (const auto& s : samples) {
    if (!s.ok) continue;
    ++ok;
    gen += s.completion_tokens;
    prompt_tokens += s.prompt_tokens;
    cached += s.cached_tokens;
    ttft.push_back(s.ttft_ms);
    total.push_back(s.total_ms);
    itl.insert(itl.end(), s.itl_ms.begin(), s.itl_ms.end());
  }
  std::printf("clients=%d requests=%zu ok=%d failed=%zu wall=%.2fs\n", clients, samples.size(), ok,
              samples.size() - ok, wall);
  std::printf("requests/s=%.2f generated_tokens/s=%.1f prompt_tokens/s=%.1f cached_prompt_tokens=%lld/%lld\n",
              ok / wall, gen / wall, prompt_tokens / wall, static_cast<long long>(cached),
              static_cast<long long>(prompt_tokens));
  std::printf("ttft_ms p50=%.1f p90=%.1f p99=%.1f  latency_ms p50=%.1f p90=%.1f p99=%.1f\n", Pct(ttft, 0.5),
              Pct(ttft, 0.9), Pct(ttft, 0.99), Pct(total, 0.5), Pct(total, 0.9), Pct(total, 0.99));
  std::printf("ttft_ms mean=%.1f prompt_tokens/request=%.1f completion_tokens/request=%.1f\n", Mean(ttft),
              ok ? static_cast<double>(prompt_tokens) / ok : 0.0, ok ? static_cast<double>(gen) / ok : 0.0);
  std::printf("itl_ms p50=%.1f p90=%.1f p99=%.1f max=%.1f\n", Pct(itl, 0.5), Pct(itl, 0.9), Pct(itl, 0.99),
              itl.empty() ? 0.0 : *std::max_element(itl.begin(), itl.end()));
  if (long_prompt > 0)
    std::printf("long_prompt ok=%d prompt_tokens=%d ttft_ms=%.1f\n", long_sample.ok ? 1 : 0,
                long_sample.prompt_tokens, long_sample.ttft_ms);
  return ok == static_cast<int>(samples.size()) && (long_prompt == 0 || long_sample.ok) ? 0 : 1;
}
