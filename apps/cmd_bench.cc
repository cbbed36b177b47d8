// rewind bench: prefill and decode speed with llama-bench's definitions (pp512: one 512-token prompt in one
// batch on an empty context; tg128: 128 single-token decode steps), median of r runs, plus the memory
// bandwidth the decode reached against the machine's read bandwidth with all threads streaming, the parallel
// regions per decode token and their cost, and peak RSS.
#include <sys/resource.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "apps/command.h"
#include "apps/device_flags.h"
#include "apps/kv_flags.h"
#include "base/flags.h"
#include "base/timer.h"
#include "engine/engine_config.h"
#include "kernels/kv_quant.h"
#include "kernels/read_bandwidth.h"
#include "kernels/thread_pool.h"
#include "model/forward.h"

namespace rw::apps {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Read bytes per second with every thread of the model's pool streaming its own buffer at once (512 MiB in
// all, at least 64 MiB per thread: far beyond the last-level cache).
double ReadBandwidth(kernels::ThreadPool& pool) {
  const size_t per_thread = std::max<size_t>(size_t{64} << 20, (size_t{512} << 20) / pool.size());
  return kernels::MeasureReadBandwidth(pool, per_thread, 5);
}

void PrintPeakRss() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak RSS: %.1f MiB (model, KV and state; before the bandwidth test)\n", ru.ru_maxrss / 1024.0);
}

// Decode tokens/s through the engine (the serving path), optionally with speculative decoding.
struct SpecRun {
  double tok_per_s = 0;
  int64_t drafted = 0, accepted = 0;
  double rounds = 0;          // verify rounds
  double generated = 0;       // tokens generated over all repetitions
  double decode_s = 0, verify_s = 0, draft_s = 0, rollback_s = 0;  // engine counters (seconds)
};

class CountSink : public engine::RequestSink {
 public:
  bool OnToken(const engine::TokenEvent&) override { return true; }
  void OnDone(const engine::Completion& c) override {
    std::lock_guard<std::mutex> l(mu);
    done = c;
    finished = true;
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  engine::Completion done;
};

double MetricValue(const std::string& text, const std::string& name) {
  size_t p = text.find("\n" + name + " ");
  if (p == std::string::npos) return 0;
  return std::atof(text.c_str() + p + name.size() + 2);
}

// One greedy request of n_gen tokens; its decode tokens/s (and drafted/accepted into run).
Expected<double> DecodeOnce(engine::Engine& eng, const std::vector<int32_t>& prompt, int n_gen, SpecRun& run) {
  engine::GenerationRequest req;
  req.prompt = prompt;
  req.max_tokens = n_gen;
  req.sampling.temperature = 0;
  req.ignore_eos = true;
  req.cache_prompt = false;
  auto sink = std::make_shared<CountSink>();
  REWIND_RETURN_IF_ERROR(eng.Submit(req, sink).ok() ? Status::Ok() : Status(Error::Internal("submit failed")));
  std::unique_lock<std::mutex> l(sink->mu);
  sink->cv.wait(l, [&] { return sink->finished; });
  if (sink->done.error) return *sink->done.error;
  run.drafted += sink->done.drafted;
  run.accepted += sink->done.accepted;
  return sink->done.generated_tokens / (sink->done.predicted_ms / 1e3);
}

void ReadEngineCounters(engine::Engine& eng, const std::vector<double>& rates, SpecRun& run) {
  std::string m = eng.MetricsText();
  run.rounds = MetricValue(m, "rewind_spec_rounds_total");
  run.generated = MetricValue(m, "rewind_generated_tokens_total");
  run.decode_s = MetricValue(m, "rewind_decode_seconds_total");
  run.verify_s = MetricValue(m, "rewind_spec_verify_seconds_total");
  run.draft_s = MetricValue(m, "rewind_spec_draft_seconds_total");
  run.rollback_s = MetricValue(m, "rewind_spec_rollback_seconds_total");
  run.tok_per_s = Median(rates);
}

// Engines, one per config, with requests alternating between them (memory bandwidth on a shared machine
// drifts over seconds, so back-to-back requests compare better than separate runs); medians of each.
Status RunEnginesAlternating(const std::vector<engine::EngineConfig>& cfgs, const std::vector<int32_t>& prompt,
                             int n_gen, int reps, std::vector<SpecRun>* runs) {
  std::vector<std::unique_ptr<engine::Engine>> engines;
  for (const auto& c : cfgs) {
    REWIND_ASSIGN_OR_RETURN(auto e, engine::CreateEngine(c));
    engines.push_back(std::move(e));
  }
  runs->assign(cfgs.size(), SpecRun{});
  std::vector<std::vector<double>> rates(cfgs.size());
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < engines.size(); ++i) {
      REWIND_ASSIGN_OR_RETURN(double x, DecodeOnce(*engines[i], prompt, n_gen, (*runs)[i]));
      rates[i].push_back(x);
    }
  for (size_t i = 0; i < engines.size(); ++i) ReadEngineCounters(*engines[i], rates[i], (*runs)[i]);
  return Status::Ok();
}

// Lazy rollback's cost: decode steps of token `tok` at `pos` from slot 0 into slot 2, alternately plain and
// with the first `rows` rows of `log` fused in (BatchSeq::prefix). Returns {median plain step, median of the
// paired differences}: pairs of back-to-back steps, so drift cancels.
Expected<std::pair<double, double>> FusedRollbackCost(model::Model& m, model::KvStorage& kv, model::StateStorage& st,
                                                      std::span<const int32_t> pages, const model::ReplaySeqLog& log,
                                                      int rows, int32_t pos, const int32_t* tok, int pairs) {
  std::vector<double> plain, diff;
  model::ForwardOutput out;
  for (int r = 0; r < pairs; ++r) {
    double t[2];
    for (int lazy = 0; lazy < 2; ++lazy) {
      model::BatchSeq d{0, 2, pages, pos, std::span<const int32_t>(tok, 1), false};
      if (lazy) {
        d.prefix = &log;
        d.prefix_rows = rows;
      }
      const double t0 = NowSeconds();
      REWIND_RETURN_IF_ERROR(m.Forward({&d, 1}, kv, st, &out));
      t[lazy] = NowSeconds() - t0;
    }
    plain.push_back(t[0]);
    diff.push_back(t[1] - t[0]);
  }
  return std::make_pair(Median(plain), Median(diff));
}

// The cost of returning a row's best k pairs instead of the row (device selection and download, or the host's
// selection on the CPU): decode steps of token `tok` at `pos` from slot 0 into slot 2, alternately with the full
// row and with the pairs. Returns {median full-row step, median of the paired differences} (drift cancels).
Expected<std::pair<double, double>> TopKCost(model::Model& m, model::KvStorage& kv, model::StateStorage& st,
                                             std::span<const int32_t> pages, int32_t pos, const int32_t* tok,
                                             int32_t k, int pairs) {
  std::vector<double> full, diff;
  model::ForwardOutput out;
  for (int r = 0; r < pairs; ++r) {
    double t[2];
    for (int top = 0; top < 2; ++top) {
      model::BatchSeq d{0, 2, pages, pos, std::span<const int32_t>(tok, 1), false};
      model::ForwardOptions fo;
      fo.top_k = top ? k : 0;
      const double t0 = NowSeconds();
      REWIND_RETURN_IF_ERROR(m.Forward({&d, 1}, kv, st, &out, fo));
      t[top] = NowSeconds() - t0;
    }
    full.push_back(t[0]);
    diff.push_back(t[1] - t[0]);
  }
  return std::make_pair(Median(full), Median(diff));
}

// Memory-system costs (issue: checkpoint create/restore vs memcpy, replay rollback vs one decode step).
Status BenchMemory(model::Model& m, int reps) {
  const int page = 32, n_pages = 8;
  REWIND_ASSIGN_OR_RETURN(auto kvs, model::KvStorage::Create(m.MakeKvConfig(n_pages, page, model::KvType::kF16)));
  REWIND_ASSIGN_OR_RETURN(auto sts, model::StateStorage::Create(m.MakeStateShape(), 3));
  model::KvStorage& kv = *kvs;
  model::StateStorage& st = *sts;
  std::vector<int32_t> pages(n_pages);
  for (int i = 0; i < n_pages; ++i) pages[i] = i;
  std::vector<int32_t> toks(200);
  std::mt19937 rng(5);
  for (auto& t : toks) t = static_cast<int32_t>(rng() % m.config().n_vocab);
  model::ForwardOutput out;
  // A realistic state: 100 tokens of prefill into slot 0.
  model::BatchSeq s0{-1, 0, pages, 0, std::span<const int32_t>(toks.data(), 100), false};
  REWIND_RETURN_IF_ERROR(m.Forward({&s0, 1}, kv, st, &out));
  const uint64_t bytes = st.bytes_per_state();
  std::vector<float> buf(bytes / sizeof(float)), buf2(bytes / sizeof(float));
  // On a GPU the slots live in device memory (docs/gpu.md): a checkpoint is a device -> host copy, a restore a
  // host -> device copy; the memcpy they are set against is then host to host, between plain buffers.
  const bool on_device = m.device_name() != "cpu";
  // Each against a plain memcpy between the same buffers, in alternating order (whichever runs second finds
  // warmer caches): create copies a slot into a checkpoint buffer (reused from the last dropped checkpoint, as in
  // the engine), restore copies a checkpoint into a slot.
  std::vector<double> t_memcpy_out, t_snap, t_memcpy_in, t_restore;
  model::StateCheckpoint ck = st.Snapshot(0);
  auto timed = [](std::vector<double>& into, auto&& f) {
    const double t0 = NowSeconds();
    f();
    into.push_back(NowSeconds() - t0);
  };
  Status restored = Status::Ok();
  for (int r = 0; r < std::max(reps, 5) * 8; ++r) {
    auto plain_out = [&] { std::memcpy(buf.data(), on_device ? buf2.data() : st.SlotData(0).data(), bytes); };
    auto plain_in = [&] {
      std::memcpy(on_device ? buf2.data() : st.MutableSlotData(1).data(), ck.data().data(), bytes);
    };
    auto restore = [&] {
      if (restored.ok()) restored = st.Restore(ck, 1);
    };
    model::StateCheckpoint c;
    if (r % 2 == 0) {
      timed(t_memcpy_out, plain_out);
      timed(t_snap, [&] { c = st.Snapshot(0); (void)c.data(); });  // until the bytes are on the host
      timed(t_memcpy_in, plain_in);
      timed(t_restore, restore);
    } else {
      timed(t_snap, [&] { c = st.Snapshot(0); (void)c.data(); });  // until the bytes are on the host
      timed(t_memcpy_out, plain_out);
      timed(t_restore, restore);
      timed(t_memcpy_in, plain_in);
    }
  }
  REWIND_RETURN_IF_ERROR(restored);
  const double mo = Median(t_memcpy_out), sn = Median(t_snap), mi = Median(t_memcpy_in), rs = Median(t_restore);
  std::printf("state / checkpoint: %llu B (%.2f MiB); KV page (%d tokens, F16): %llu B; replay log: %llu B/token "
              "(%.2f%% of a state)\n",
              (unsigned long long)bytes, bytes / 1048576.0, page, (unsigned long long)kv.bytes_per_page(),
              (unsigned long long)m.ReplayBytesPerToken(), 100.0 * m.ReplayBytesPerToken() / bytes);
  std::printf("checkpoint create %.1f us (memcpy of the same bytes %.1f us: %.2fx), restore %.1f us (memcpy %.1f us: "
              "%.2fx)\n", sn * 1e6, mo * 1e6, sn / mo, rs * 1e6, mi * 1e6, rs / mi);
  if (on_device)
    std::printf("checkpoint save (%s -> host) %.2f GB/s, restore (host -> %s) %.2f GB/s\n", m.device_name().c_str(),
                bytes / sn * 1e-9, m.device_name().c_str(), bytes / rs * 1e-9);
  // One decode step (slot 0 -> slot 0) as the unit of cost.
  std::vector<double> t_dec;
  for (int r = 0; r < std::max(reps, 5); ++r) {
    model::BatchSeq d{0, 2, pages, 100, std::span<const int32_t>(toks.data() + 100, 1), false};
    st.CopySlot(0, 2);
    double t0 = NowSeconds();
    REWIND_RETURN_IF_ERROR(m.Forward({&d, 1}, kv, st, &out));
    t_dec.push_back(NowSeconds() - t0);
  }
  double dec = Median(t_dec);
  // A 17-token verify batch from slot 0 into slot 1 with the replay log; roll back to k kept tokens.
  model::ReplayLog log;
  model::ForwardOptions fo;
  fo.replay = &log;
  model::BatchSeq v{0, 1, pages, 100, std::span<const int32_t>(toks.data() + 100, 17), true};
  REWIND_RETURN_IF_ERROR(m.Forward({&v, 1}, kv, st, &out, fo));
  std::printf("one decode step: %.3f ms\n", dec * 1e3);
  // As the engine does it: in place in the slot that holds the batch-start state (then that slot becomes the
  // live one), so no state copy. The untimed copy only restores the batch-start state for the next repetition.
  for (int k = 1; k <= 16; ++k) {
    std::vector<double> t;
    for (int r = 0; r < std::max(reps, 5); ++r) {
      st.CopySlot(0, 2);
      double t0 = NowSeconds();
      REWIND_RETURN_IF_ERROR(m.ReplayState(2, 2, log.seqs[0], k, st));
      t.push_back(NowSeconds() - t0);
    }
    double rb = Median(t);
    std::printf("rollback via replay keeping %2d tokens: %.3f ms = %.2f%% of a decode step\n", k, rb * 1e3,
                100.0 * rb / dec);
  }
  // The engine's lazy rollback: the kept rows are re-applied inside the next decode step's GDN layers, while
  // each layer's state is in cache (BatchSeq::prefix). Its cost is that step's extra time; steps alternate with
  // plain ones from the same state so drift cancels.
  for (int k : {1, 2, 3, 4, 8, 16}) {
    REWIND_ASSIGN_OR_RETURN(auto c, FusedRollbackCost(m, kv, st, pages, log.seqs[0], k, 100 + k,
                                                      toks.data() + 100 + k, std::max(reps, 5) * 4));
    std::printf("rollback fused into the next decode step, keeping %2d tokens: %+.3f ms = %.2f%% of a decode step\n",
                k, c.second * 1e3, 100.0 * c.second / c.first);
  }
  // The speculative case: a verify batch [last, d1..dk] whose k drafts are all rejected keeps its first token.
  // Rolled-back tokens are never touched, so the cost does not grow with k.
  for (int k : {1, 4, 16}) {
    model::ReplayLog vlog;
    model::ForwardOptions vo;
    vo.replay = &vlog;
    model::BatchSeq vb{0, 1, pages, 100, std::span<const int32_t>(toks.data() + 100, static_cast<size_t>(k + 1)), true};
    REWIND_RETURN_IF_ERROR(m.Forward({&vb, 1}, kv, st, &out, vo));
    std::vector<double> eager;
    for (int r = 0; r < std::max(reps, 5) * 4; ++r) {
      st.CopySlot(0, 2);
      const double t0 = NowSeconds();
      REWIND_RETURN_IF_ERROR(m.ReplayState(2, 2, vlog.seqs[0], 1, st));
      eager.push_back(NowSeconds() - t0);
    }
    REWIND_ASSIGN_OR_RETURN(auto c, FusedRollbackCost(m, kv, st, pages, vlog.seqs[0], 1, 101, toks.data() + 120,
                                                      std::max(reps, 5) * 4));
    const double step = c.first, e = Median(eager), f = c.second;
    std::printf("rollback of %2d rejected drafts (verify batch of %2d): eager %.3f ms = %.2f%%, fused %+.3f ms = %.2f%% "
                "of a decode step\n", k, k + 1, e * 1e3, 100.0 * e / step, f * 1e3, 100.0 * f / step);
  }
  return Status::Ok();
}

// The device time by kernel of `runs` forwards (--gpu-profile), per forward: every kernel's runs and time, its
// share of the total, largest first.
void PrintDeviceProfile(const std::vector<model::DeviceProfileRow>& rows, double runs, const std::string& per) {
  double total = 0;
  for (const auto& r : rows) total += r.seconds;
  std::printf("device time per %s by kernel: %.3f ms in all\n", per.c_str(), 1e3 * total / runs);
  for (const auto& r : rows)
    std::printf("  %-28s %8.1f runs %10.1f us %5.1f%%\n", r.name.c_str(), static_cast<double>(r.count) / runs,
                1e6 * r.seconds / runs, total > 0 ? 100.0 * r.seconds / total : 0.0);
}

// " @ d16384" after a test name when it ran at a context depth (llama-bench's spelling).
std::string DepthSuffix(int n_depth) { return n_depth > 0 ? " @ d" + std::to_string(n_depth) : ""; }

int CmdBench(int argc, char** argv) {
  std::string model_path;
  int threads = 0, n_prompt = 512, n_gen = 128, reps = 5;
  int n_depth = 0;
  bool depth_synthetic = false;
  engine::EngineConfig kv_flags;
  std::string spec, model_draft;
  int draft_max = 3;
  int draft_vocab = engine::EngineConfig{}.draft_vocab;
  double synth = -1;
  bool memory = false;
  int verify = 0;
  int decode_top_k = 0;
  bool gpu_profile = false;
  FlagSet flags("rewind bench", "Prefill (pp) and decode (tg) tokens/s, like llama-bench.");
  flags.Add("model", 'm', &model_path, "GGUF model file (required)");
  flags.Add("threads", 't', &threads, "threads (0 = all cores)");
  DeviceFlags dev;
  dev.Declare(flags);
  flags.Add("n-prompt", 'p', &n_prompt, "prompt tokens for the prefill test (0 = skip)");
  flags.Add("n-gen", 'n', &n_gen, "generated tokens for the decode test (0 = skip)");
  flags.Add("top-k", 0, &decode_top_k,
            "decode test: each step returns its row's best K (logit, id) pairs instead of the logits row, as the "
            "engine asks for greedy and top-k requests (1..128; 0 = the full row), then times such steps against "
            "full-row steps, paired");
  flags.Add("repetitions", 'r', &reps, "runs per test; the median is reported");
  flags.Add("gpu-profile", 0, &gpu_profile,
            "with --device: also print the device time of each kernel per prefill and per decode token (a "
            "timestamp after every command; docs/gpu.md \"Profiling\")");
  flags.Add("n-depth", 'd', &n_depth,
            "context depth: tokens prefilled (untimed, once) before the pp and tg tests run at that position, "
            "like llama-bench -d");
  flags.Add("depth-synthetic", 0, &depth_synthetic,
            "fill the -d depth's KV rows with random values (zero recurrent state) instead of prefilling it: "
            "decode and prefill cost do not depend on the cached values, and a 16K-token prefill takes minutes");
  AddKvTypeFlags(flags, &kv_flags);
  flags.Add("spec", 0, &spec,
            "compare decode through the engine with and without speculative decoding (mtp, draft, ngram)");
  flags.Add("model-draft", 0, &model_draft, "draft model for --spec draft");
  flags.Add("memory", 0, &memory,
            "instead: memory-system costs (checkpoint create/restore vs memcpy, replay rollback vs a decode step)");
  flags.Add("verify", 0, &verify,
            "also time a speculative verify batch of this many tokens (all logits, replay log, hidden rows) "
            "against a decode step (0 = skip)");
  flags.Add("draft-max", 0, &draft_max, "max drafted tokens per round for --spec");
  flags.Add("draft-vocab", 0, &draft_vocab, "MTP drafts among the first N token ids only (0 = all)");
  flags.Add("spec-synth-accept", 0, &synth,
            "benchmark only: accept drafted tokens with this probability (-1 = verify for real)");
  Status st = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (st.ok() && dev.list) {
    PrintDevices();
    return 0;
  }
  if (!st.ok() || model_path.empty() || reps < 1 || n_prompt < 0 || n_gen < 0 || n_depth < 0 || decode_top_k < 0 ||
      decode_top_k > kernels::kMaxTopLogits) {
    std::fprintf(stderr, "rewind bench: %s\n", st.ok() ? "need -m MODEL, r >= 1, p,n,d >= 0" : st.error().message.c_str());
    return 2;
  }
  auto kv_types = kv_flags.CacheTypes();
  if (!kv_types.ok()) {
    std::fprintf(stderr, "rewind bench: %s\n", kv_types.error().message.c_str());
    return 2;
  }
  const std::string kv = kernels::KvTypesName(*kv_types);
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  model::LoadOptions lo;
  lo.n_threads = threads;
  auto device = dev.Resolve();
  if (!device.ok()) {
    std::fprintf(stderr, "rewind bench: %s\n", device.error().message.c_str());
    return 2;
  }
  lo.device = *device;
  lo.n_gpu_layers = dev.n_gpu_layers;
  auto loaded = model::Model::Load(model_path, lo);
  if (!loaded.ok()) {
    std::fprintf(stderr, "rewind bench: %s\n", loaded.error().ToString().c_str());
    return 1;
  }
  model::Model& m = **loaded;
  if (gpu_profile) {
    if (Status ps = m.SetDeviceProfiling(true); !ps.ok()) {
      std::fprintf(stderr, "rewind bench --gpu-profile: %s\n", ps.error().message.c_str());
      return 2;
    }
  }
  if (memory) {
    Status st = BenchMemory(m, reps);
    if (!st.ok()) {
      std::fprintf(stderr, "rewind bench --memory: %s\n", st.error().ToString().c_str());
      return 1;
    }
    return 0;
  }
  const int page = 32;
  int total = n_depth + n_prompt + std::max(n_gen, verify) + 1;
  int n_pages = (total + page - 1) / page;
  auto kvs = model::KvStorage::Create(m.MakeKvConfig(n_pages, page, *kv_types));
  auto sts = model::StateStorage::Create(m.MakeStateShape(), 3);
  if (!kvs.ok() || !sts.ok()) {
    std::fprintf(stderr, "rewind bench: %s\n", kvs.ok() ? "cannot allocate storage" : kvs.error().message.c_str());
    return 1;
  }
  std::vector<int32_t> pages(n_pages);
  for (int i = 0; i < n_pages; ++i) pages[i] = i;
  std::mt19937 rng(1234);
  std::vector<int32_t> tokens(total);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % m.config().n_vocab);

  if (!spec.empty()) {
    // A repetitive prompt (a 16-token phrase repeated) so that n-gram lookup has something to find.
    std::vector<int32_t> prompt;
    for (int i = 0; i < std::max(64, n_prompt); ++i) prompt.push_back(tokens[i % 16]);
    engine::EngineConfig ec;
    ec.model_path = model_path;
    ec.n_threads = threads;
    ec.n_parallel = 1;
    ec.n_ctx = static_cast<int32_t>(prompt.size()) + n_gen + 64;
    ec.kv_type = kv_flags.kv_type;
    ec.cache_type_k = kv_flags.cache_type_k;
    ec.cache_type_v = kv_flags.cache_type_v;
    ec.cache_ram_mib = 1024;
    engine::EngineConfig sc = ec;
    sc.spec = spec;
    sc.model_draft = model_draft;
    sc.draft_max = draft_max;
    sc.draft_vocab = draft_vocab;
    sc.spec_synth_accept = synth;
    // Plain, speculative with lazy rollback (the default), speculative with every rollback replayed at once.
    engine::EngineConfig eager = sc;
    eager.lazy_rollback = false;
    std::vector<SpecRun> runs;
    Status rs = RunEnginesAlternating({ec, sc, eager}, prompt, n_gen, reps, &runs);
    if (!rs.ok()) {
      std::fprintf(stderr, "rewind bench: %s\n", rs.error().ToString().c_str());
      return 1;
    }
    const SpecRun* plain = &runs[0];
    std::printf("decode plain %.2f tok/s\n", plain->tok_per_s);
    const double step = plain->generated > 0 ? plain->decode_s / plain->generated : 0;
    for (int v = 1; v <= 2; ++v) {
      const SpecRun* sp = &runs[v];
      // Tokens emitted per verify round (accepted drafts + the one token every round yields).
      double mean_len = sp->rounds > 0 ? (sp->accepted + sp->rounds) / sp->rounds : 1.0;
      std::printf("decode spec=%s draft-max=%d%s, %s rollback: %.2f tok/s (%.2fx); drafted %lld accepted %lld "
                  "(%.0f%%); mean tokens per verify round %.2f\n",
                  spec.c_str(), draft_max, synth >= 0 ? " (synthetic acceptance: output invalid)" : "",
                  v == 1 ? "lazy" : "eager", sp->tok_per_s, sp->tok_per_s / plain->tok_per_s,
                  static_cast<long long>(sp->drafted), static_cast<long long>(sp->accepted),
                  sp->drafted ? 100.0 * sp->accepted / sp->drafted : 0.0, mean_len);
      if (sp->rounds > 0 && step > 0) {
        // Where a round's time goes, in plain decode steps (forward time per generated token of the plain run).
        std::printf("  per verify round, in plain decode steps of %.2f ms: verify %.3f, drafting %.3f, rollback "
                    "call %.3f\n",
                    1e3 * step, sp->verify_s / sp->rounds / step, sp->draft_s / sp->rounds / step,
                    sp->rollback_s / sp->rounds / step);
      }
    }
    if (runs[1].rounds > 0 && runs[2].rounds > 0 && step > 0) {
      // A lazy rollback's cost is extra forward time in the next round: the verify time difference.
      const SpecRun& l = runs[1];
      const SpecRun& e = runs[2];
      const double lazy_rb = l.verify_s / l.rounds - (e.verify_s / e.rounds);
      const double eager_rb = e.rollback_s / e.rounds;
      const double round_l = (l.verify_s + l.draft_s + l.rollback_s) / l.rounds;
      const double round_e = (e.verify_s + e.draft_s + e.rollback_s) / e.rounds;
      std::printf("rollback per round: eager %.3f ms = %.2f%% of its round; lazy (verify time difference) %.3f ms = "
                  "%.2f%% of its round\n",
                  1e3 * eager_rb, 100.0 * eager_rb / round_e, 1e3 * lazy_rb, 100.0 * lazy_rb / round_l);
    }
    return 0;
  }
  std::printf("model: %s (%s), threads %d, kv %s (%.1f KiB per token)\n", model_path.c_str(),
              m.config().arch_name.c_str(), threads, kv.c_str(), (*kvs)->bytes_per_token() / 1024.0);
  model::ForwardOutput out;
  // Depth: the first n_depth tokens prefilled once into state slot 2 (in batches of 512, as llama-bench does);
  // every test starts from that state at position n_depth.
  const int depth_slot = n_depth > 0 ? 2 : -1;
  if (n_depth > 0 && depth_synthetic) {
    // Random K/V rows in the cache's types for positions [0, n_depth), state slot 2 zero.
    std::mt19937 fill(99);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    model::KvStorage& kv = **kvs;
    const int32_t W = kv.config().row_width;
    std::vector<float> row(W);
    for (int32_t l = 0; l < kv.config().n_layers; ++l)
      for (int p = 0; p < n_depth; ++p) {
        for (auto& x : row) x = dist(fill);
        kernels::QuantizeKvRow(kv.config().type.k, row.data(), kv.K(l, p / page) + (p % page) * kv.k_row_bytes(), W);
        for (auto& x : row) x = dist(fill);
        kernels::QuantizeKvRow(kv.config().type.v, row.data(), kv.V(l, p / page) + (p % page) * kv.v_row_bytes(), W);
      }
    (*sts)->Clear(2);
    std::printf("depth %d: synthetic (random KV rows, zero state)\n", n_depth);
  } else if (n_depth > 0) {
    const double t0 = NowSeconds();
    for (int p0 = 0; p0 < n_depth; p0 += 512) {
      model::BatchSeq s;
      s.state_in = p0 == 0 ? -1 : 2;
      s.state_out = 2;
      s.pages = pages;
      s.pos0 = p0;
      s.tokens = std::span<const int32_t>(tokens.data() + p0, std::min(512, n_depth - p0));
      if (Status fs = m.Forward({&s, 1}, **kvs, **sts, &out); !fs.ok()) {
        std::fprintf(stderr, "rewind bench: %s\n", fs.error().ToString().c_str());
        return 1;
      }
    }
    std::printf("depth %d: prefilled in %.1f s\n", n_depth, NowSeconds() - t0);
  }
  if (n_prompt > 0) {
    std::vector<double> rates;
    m.TakeDeviceProfile();  // the depth's forwards are not part of the test
    const model::DeviceCounters dev0 = m.device_counters();
    const double all0 = NowSeconds();
    for (int r = 0; r < reps + 1; ++r) {  // first run warms up
      model::BatchSeq s;
      s.state_in = depth_slot;
      s.state_out = 0;
      s.pages = pages;
      s.pos0 = n_depth;
      s.tokens = std::span<const int32_t>(tokens.data() + n_depth, n_prompt);
      double t0 = NowSeconds();
      Status fs = m.Forward({&s, 1}, **kvs, **sts, &out);
      double dt = NowSeconds() - t0;
      if (!fs.ok()) {
        std::fprintf(stderr, "rewind bench: %s\n", fs.error().ToString().c_str());
        return 1;
      }
      if (r > 0) rates.push_back(n_prompt / dt);
    }
    std::printf("pp%d%s %.2f tok/s\n", n_prompt, DepthSuffix(n_depth).c_str(), Median(rates));
    if (m.device_index() >= 0) {
      const model::DeviceCounters dev1 = m.device_counters();
      const double runs = reps + 1, run_s = (NowSeconds() - all0) / runs;
      const double wait_s = (dev1.wait_seconds - dev0.wait_seconds) / runs;
      std::printf("device work per prefill of %d tokens: %.0f dispatches (%.0f barriers) in %.1f batches, %.2f waits; "
                  "a run took %.3f ms: the host waited %.3f ms for the device and spent %.3f ms recording and on the "
                  "CPU\n",
                  n_prompt, static_cast<double>(dev1.dispatches - dev0.dispatches) / runs,
                  static_cast<double>(dev1.barriers - dev0.barriers) / runs,
                  static_cast<double>(dev1.batches - dev0.batches) / runs,
                  static_cast<double>(dev1.submissions - dev0.submissions) / runs, 1e3 * run_s, 1e3 * wait_s,
                  1e3 * (run_s - wait_s));
      if (gpu_profile) PrintDeviceProfile(m.TakeDeviceProfile(), runs, "prefill of " + std::to_string(n_prompt) + " tokens");
    }
  }
  if (n_gen > 0) {
    std::vector<double> rates;
    kernels::ThreadPool* pool = m.pool();
    const uint64_t regions0 = pool->regions();
    m.TakeDeviceProfile();
    const model::DeviceCounters dev0 = m.device_counters();
    const double all0 = NowSeconds();
    for (int r = 0; r < reps + 1; ++r) {
      double t0 = 0;
      for (int i = 0; i < n_gen + 1; ++i) {  // step 0 (empty context) is not timed, as in llama-bench's warm-up
        if (i == 1) t0 = NowSeconds();
        model::BatchSeq s;
        s.state_in = i == 0 ? depth_slot : 0;
        s.state_out = 0;
        s.pages = pages;
        s.pos0 = n_depth + i;
        s.tokens = std::span<const int32_t>(tokens.data() + n_depth + i, 1);
        model::ForwardOptions fo;
        fo.top_k = decode_top_k;
        Status fs = m.Forward({&s, 1}, **kvs, **sts, &out, fo);
        if (!fs.ok()) {
          std::fprintf(stderr, "rewind bench: %s\n", fs.error().ToString().c_str());
          return 1;
        }
      }
      double dt = NowSeconds() - t0;
      if (r > 0) rates.push_back(n_gen / dt);
    }
    const double steps = (reps + 1) * static_cast<double>(n_gen + 1);
    const double step_s = (NowSeconds() - all0) / steps;
    const double regions_per_token = static_cast<double>(pool->regions() - regions0) / steps;
    const model::DeviceCounters dev1 = m.device_counters();
    double tg = Median(rates);
    uint64_t wbytes = m.decode_weight_bytes();
    PrintPeakRss();
    const bool on_device = m.device_index() >= 0;
    std::printf("tg%d%s%s %.2f tok/s\n", n_gen, DepthSuffix(n_depth).c_str(),
                decode_top_k > 0 ? (" (top-" + std::to_string(decode_top_k) + " pairs)").c_str() : "", tg);
    if (on_device) {
      // The host records a step's dispatches, then waits in the submission for the device to run them.
      const double wait_s = (dev1.wait_seconds - dev0.wait_seconds) / steps;
      std::printf("device work per decode token: %.0f dispatches (%.0f barriers) in %.1f batches, %.2f waits; a step "
                  "took %.3f ms: the host waited %.3f ms for the device and spent %.3f ms recording and on the CPU\n",
                  static_cast<double>(dev1.dispatches - dev0.dispatches) / steps,
                  static_cast<double>(dev1.barriers - dev0.barriers) / steps,
                  static_cast<double>(dev1.batches - dev0.batches) / steps,
                  static_cast<double>(dev1.submissions - dev0.submissions) / steps, 1e3 * step_s, 1e3 * wait_s,
                  1e3 * (step_s - wait_s));
      if (gpu_profile) PrintDeviceProfile(m.TakeDeviceProfile(), steps, "decode token");
    } else {
      const double region_ns = kernels::MeasureRegionNanos(*pool, 20000);
      std::printf("parallel regions per decode token: %.0f; one empty region: %.0f ns at %d threads (%.1f%% of a "
                  "decode step)\n",
                  regions_per_token, region_ns, pool->size(), 100.0 * regions_per_token * region_ns * 1e-9 * tg);
    }
    std::printf("weights read per token: %.1f MiB; decode bandwidth %.2f GB/s\n", wbytes / 1048576.0, wbytes * tg / 1e9);
    if (decode_top_k > 0) {
      auto cost = TopKCost(m, **kvs, **sts, pages, n_depth + n_gen, tokens.data() + n_depth + n_gen, decode_top_k,
                           4 * reps + 1);
      if (!cost.ok()) {
        std::fprintf(stderr, "rewind bench: %s\n", cost.error().ToString().c_str());
        return 1;
      }
      std::printf("decode step with the top-%d pairs instead of the %d-entry row: %+.3f ms (full-row step %.3f ms; "
                  "median of %d paired steps)\n",
                  decode_top_k, m.config().n_vocab, 1e3 * cost->second, 1e3 * cost->first, 4 * reps + 1);
    }
    if (!on_device) {  // the host's memory bounds a CPU decode; a device's weights stream from its own memory
      const double read_bw = ReadBandwidth(*pool);
      std::printf("machine read bandwidth (%d threads streaming at once): %.2f GB/s; decode bound at that rate: %.2f "
                  "tok/s; reached %.0f%%\n",
                  pool->size(), read_bw / 1e9, read_bw / wbytes, 100.0 * tg * wbytes / read_bw);
    }
  }
  if (n_gen == 0) PrintPeakRss();
  if (verify > 0 && n_prompt >= 1 && n_prompt + verify < total) {
    // A verify batch as the engine runs it, after the prompt: [last, d1..dn] with logits and hidden rows for
    // every token and the replay log, from state slot 0 into slot 1 (slot 0 stays for rollback); against a
    // decode step at the same position.
    auto time_batch = [&](int n, bool as_verify) -> Expected<double> {
      std::vector<double> times;
      for (int r = 0; r < reps + 1; ++r) {
        model::BatchSeq s;
        s.state_in = 0;
        s.state_out = 1;
        s.pages = pages;
        s.pos0 = n_prompt;
        s.tokens = std::span<const int32_t>(tokens.data() + n_prompt, n);
        s.all_logits = as_verify;
        model::ReplayLog log;
        model::ForwardOptions fo;
        if (as_verify) {
          fo.replay = &log;
          fo.want_hidden = true;
          fo.hidden_all = true;
        }
        double t0 = NowSeconds();
        REWIND_RETURN_IF_ERROR(m.Forward({&s, 1}, **kvs, **sts, &out, fo));
        if (r > 0) times.push_back(NowSeconds() - t0);
      }
      return Median(times);
    };
    model::BatchSeq s;  // the prompt's state in slot 0
    s.state_in = -1;
    s.state_out = 0;
    s.pages = pages;
    s.tokens = std::span<const int32_t>(tokens.data(), n_prompt);
    Status fs = m.Forward({&s, 1}, **kvs, **sts, &out);
    auto one = fs.ok() ? time_batch(1, false) : Expected<double>(fs.error());
    auto ver = one.ok() ? time_batch(verify, true) : one;
    if (!ver.ok()) {
      std::fprintf(stderr, "rewind bench: %s\n", ver.error().ToString().c_str());
      return 1;
    }
    std::printf("verify batch of %d tokens: %.2f ms = %.2f decode steps of %.2f ms\n", verify, 1e3 * *ver,
                *ver / *one, 1e3 * *one);
  }
  return 0;
}

}  // namespace

REWIND_COMMAND("bench", "prefill/decode tokens per second (llama-bench pp/tg)", CmdBench);

}  // namespace rw::apps
