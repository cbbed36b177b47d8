#include "model/conformance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <map>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "kernels/kv_quant.h"
#include "model/forward.h"

namespace rw::model {
namespace {

using json = nlohmann::json;

constexpr double kF32MaxAbsKvF32 = 1e-2;
constexpr double kF32MaxAbsKvF16 = 2e-2;
// References made with a quantised KV cache (manifest settings type_k / type_v; llama.cpp needs flash attention
// for a quantised V): rewind runs the same types. llama.cpp's flash attention also rounds each query to the K
// type's dot-product format (Q8_0 / Q8_1) where rewind keeps it in F32, hence a looser bound for F32 models.
constexpr double kF32MaxAbsQuantKv = 0.08;  // measured 1.95e-2 (q8_0), 2.25e-2 (q4_0)
constexpr double kMarginForTop1 = 1.0;
// Router gaps below this count as expert-selection near-ties (README 6.4). F32 router logits agree with llama.cpp
// to ~1e-6; quantised models round activations, so their router logits move by far more.
constexpr double kRouterGapTieF32 = 1e-4;
constexpr double kRouterGapTieQuant = 5e-2;

Expected<json> ReadJson(const std::string& path) {
  REWIND_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::Corrupt(path + ": invalid JSON");
  return j;
}

Expected<std::vector<float>> ReadF32(const std::string& path, size_t n) {
  REWIND_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  if (bytes.size() != n * sizeof(float))
    return Error::Corrupt(path + ": " + std::to_string(bytes.size()) + " bytes, expected " +
                          std::to_string(n * sizeof(float)));
  std::vector<float> v(n);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

int32_t Argmax(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  return best;
}

float Margin(std::span<const float> row) {
  float a = -INFINITY, b = -INFINITY;
  for (float v : row) {
    if (v > a) {
      b = a;
      a = v;
    } else if (v > b) {
      b = v;
    }
  }
  return a - b;
}

Precision DetectPrecision(const gguf::File& f) {
  bool q8 = false, k = false, half = false, other = false;
  for (const auto& t : f.tensors()) {
    switch (t.type) {
      case gguf::TensorType::kF32: break;
      case gguf::TensorType::kQ8_0: q8 = true; break;
      case gguf::TensorType::kQ4_K: case gguf::TensorType::kQ5_K: case gguf::TensorType::kQ6_K:
      case gguf::TensorType::kQ2_K: case gguf::TensorType::kQ3_K: k = true; break;
      case gguf::TensorType::kF16: case gguf::TensorType::kBF16: half = true; break;
      default: other = true;
    }
  }
  if (k) return Precision::kQ4K;
  if (other) return Precision::kOther;
  if (q8) return Precision::kQ8_0;
  if (half) return Precision::k16Bit;
  return Precision::kF32;
}

double MeanLimit(Precision p) { return p == Precision::kQ4K || p == Precision::kOther ? 0.15 : 0.1; }

std::vector<std::string> ListDirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != ".." && FileExists(dir + "/" + n + "/manifest.json")) out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

struct Runner {
  Model& model;
  KvTypes kv_type;

  // Prefill all prompt tokens in one batch (all logits), then greedy decode. Returns logits rows.
  Status Run(const std::vector<int32_t>& prompt, int32_t n_steps, std::vector<float>* prompt_logits,
             std::vector<int32_t>* greedy, std::vector<std::vector<float>>* step_logits) {
    const int32_t ps = 32;
    const int32_t total = static_cast<int32_t>(prompt.size()) + n_steps + 1;
    const int32_t n_pages = (total + ps - 1) / ps;
    REWIND_ASSIGN_OR_RETURN(auto kv, KvStorage::Create(model.MakeKvConfig(n_pages, ps, kv_type)));
    REWIND_ASSIGN_OR_RETURN(auto st, StateStorage::Create(model.MakeStateShape(), 1));
    std::vector<int32_t> pages(n_pages);
    for (int32_t i = 0; i < n_pages; ++i) pages[i] = i;
    BatchSeq b;
    b.state_in = -1;
    b.state_out = 0;
    b.pages = pages;
    b.pos0 = 0;
    b.tokens = prompt;
    b.all_logits = true;
    ForwardOutput out;
    REWIND_RETURN_IF_ERROR(model.Forward({&b, 1}, *kv, *st, &out));
    *prompt_logits = std::move(out.logits);
    const int32_t V = model.config().n_vocab;
    std::span<const float> last(prompt_logits->data() + (prompt.size() - 1) * V, V);
    int32_t tok = Argmax(last);
    int32_t pos = static_cast<int32_t>(prompt.size());
    for (int32_t s = 0; s < n_steps; ++s) {
      greedy->push_back(tok);
      if (s + 1 == n_steps) break;
      BatchSeq d;
      d.state_in = 0;
      d.state_out = 0;
      d.pages = pages;
      d.pos0 = pos++;
      d.tokens = {&tok, 1};
      REWIND_RETURN_IF_ERROR(model.Forward({&d, 1}, *kv, *st, &out));
      step_logits->push_back(out.logits);
      tok = Argmax(out.Row(0));
    }
    return Status::Ok();
  }
};

}  // namespace

Expected<std::vector<ModelResult>> RunConformance(const ConformanceOptions& opt,
                                                  const std::function<void(const CaseResult&)>& on_case) {
  REWIND_ASSIGN_OR_RETURN(json prompts, ReadJson(opt.dir + "/prompts.json"));
  std::map<std::string, std::vector<int32_t>> prompt_tokens;
  try {
    for (const auto& c : prompts.at("cases")) prompt_tokens[c.at("name").get<std::string>()] = c.at("tokens").get<std::vector<int32_t>>();
  } catch (const json::exception& e) {
    return Error::Corrupt(opt.dir + "/prompts.json: " + e.what());
  }
  std::vector<ModelResult> results;
  const std::vector<std::string> refs = ListDirs(opt.dir + "/ref");
  if (refs.empty()) return Error::NotFound(opt.dir + "/ref: no reference folders with a manifest.json");
  for (const std::string& ref : refs) {
    const std::string rdir = opt.dir + "/ref/" + ref;
    REWIND_ASSIGN_OR_RETURN(json man, ReadJson(rdir + "/manifest.json"));
    ModelResult mr;
    mr.model = ref;
    try {
      mr.file = man.at("model").get<std::string>();
    } catch (const json::exception& e) {
      return Error::Corrupt(rdir + "/manifest.json: " + e.what());
    }
    if (!opt.model_filter.empty() && opt.model_filter != ref && opt.model_filter != mr.file) continue;
    auto loaded = Model::Load(opt.dir + "/models/" + mr.file, LoadOptions{opt.n_threads, opt.device, opt.n_gpu_layers});
    if (!loaded.ok()) {
      if (loaded.error().kind == ErrorKind::kUnsupported) {
        mr.skipped = true;
        mr.skip_reason = loaded.error().message;
        mr.pass = true;
      } else {
        mr.why = loaded.error().ToString();
      }
      results.push_back(std::move(mr));
      continue;
    }
    Model& model = **loaded;
    mr.precision = DetectPrecision(model.file());
    const bool f32 = mr.precision == Precision::kF32;
    // The reference's KV cache types: a quantised one is reproduced; F32 ones follow opt.kv_f16.
    KvTypes kv_types = opt.kv_f16 ? KvType::kF16 : KvType::kF32;
    bool quant_kv = false;
    if (man.contains("settings") && man["settings"].contains("type_k") && man["settings"].contains("type_v")) {
      auto k = kernels::ParseKvType(man["settings"]["type_k"].get<std::string>());
      auto v = kernels::ParseKvType(man["settings"]["type_v"].get<std::string>());
      if (!k.ok() || !v.ok()) return Error::Corrupt(rdir + "/manifest.json: unknown KV cache type in settings");
      quant_kv = !(*k == KvType::kF32 && *v == KvType::kF32);
      if (quant_kv) kv_types = KvTypes(*k, *v);
    }
    mr.kv_type = kernels::KvTypesName(kv_types);
    const double kF32MaxAbs = quant_kv ? kF32MaxAbsQuantKv : opt.kv_f16 ? kF32MaxAbsKvF16 : kF32MaxAbsKvF32;
    const double tol = f32 ? kF32MaxAbs : kMarginForTop1;  // logit error level for greedy comparisons
    const double tie = f32 ? kRouterGapTieF32 : kRouterGapTieQuant;
    json gaps;
    if (FileExists(rdir + "/router_gaps.json")) {
      REWIND_ASSIGN_OR_RETURN(gaps, ReadJson(rdir + "/router_gaps.json"));
    }
    const int32_t V = model.config().n_vocab;
    double sum_abs = 0;
    mr.pass = true;
    try {
      for (const auto& c : man.at("cases")) {
        CaseResult cr;
        cr.model = ref;
        cr.name = c.at("name").get<std::string>();
        if (!opt.case_filter.empty() && opt.case_filter != cr.name) continue;
        if (!prompt_tokens.count(cr.name)) return Error::Corrupt("prompts.json has no case '" + cr.name + "'");
        const auto& prompt = prompt_tokens[cr.name];
        const auto positions = c.at("logit_positions").get<std::vector<int32_t>>();
        const auto ref_greedy = c.at("greedy_tokens").get<std::vector<int32_t>>();
        const auto ref_margin = c.at("greedy_top1_margin").get<std::vector<double>>();
        const auto& ref_topk = c.at("greedy_topk");
        REWIND_ASSIGN_OR_RETURN(std::vector<float> ref_logits,
                                ReadF32(rdir + "/" + c.at("logits_file").get<std::string>(), positions.size() * V));
        // MoE near-ties: positions / steps from the first tiny router gap on are not compared.
        int32_t first_tie_pos = INT32_MAX, first_tie_step = INT32_MAX;
        if (!gaps.is_null() && gaps.at("cases").contains(cr.name)) {
          const auto& g = gaps["cases"][cr.name];
          const auto pg = g.at("prompt_gaps").get<std::vector<double>>();
          for (size_t i = 0; i < pg.size(); ++i)
            if (pg[i] < tie) {
              first_tie_pos = static_cast<int32_t>(i);
              break;
            }
          const auto gg = g.at("gen_gaps").get<std::vector<double>>();
          for (size_t s = 0; s < gg.size(); ++s)
            if (gg[s] < tie) {
              first_tie_step = static_cast<int32_t>(s + 1);
              break;
            }
          if (first_tie_pos != INT32_MAX) first_tie_step = 0;
        }
        const int32_t n_steps = opt.greedy_steps >= 0 ? std::min<int32_t>(opt.greedy_steps, ref_greedy.size())
                                                      : static_cast<int32_t>(ref_greedy.size());
        Runner runner{model, kv_types};
        std::vector<float> logits;
        std::vector<int32_t> greedy;
        std::vector<std::vector<float>> steps;
        REWIND_RETURN_IF_ERROR(runner.Run(prompt, n_steps, &logits, &greedy, &steps));
        double case_sum = 0;
        for (size_t r = 0; r < positions.size(); ++r) {
          if (positions[r] >= first_tie_pos) {
            ++cr.rows_excluded;
            continue;
          }
          std::span<const float> mine(logits.data() + static_cast<size_t>(positions[r]) * V, V);
          std::span<const float> want(ref_logits.data() + r * V, V);
          for (int32_t v = 0; v < V; ++v) {
            const double d = std::fabs(static_cast<double>(mine[v]) - want[v]);
            cr.max_abs = std::max(cr.max_abs, d);
            case_sum += d;
          }
          ++cr.rows;
          const bool same = Argmax(mine) == Argmax(want);
          cr.top1_agree += same;
          if (Margin(want) > kMarginForTop1) {
            ++cr.top1_checked;
            cr.top1_checked_agree += same;
          }
        }
        cr.mean_abs = cr.rows ? case_sum / (static_cast<double>(cr.rows) * V) : 0;
        // Greedy: steps before the first low-margin (or router near-tie) step must match.
        int32_t limit = n_steps;
        for (int32_t s = 0; s < n_steps; ++s)
          if (ref_margin[s] < tol || s >= first_tie_step) {
            limit = s;
            break;
          }
        cr.greedy_compared = limit;
        cr.greedy_total = n_steps;
        while (cr.greedy_match < n_steps && greedy[cr.greedy_match] == ref_greedy[cr.greedy_match]) ++cr.greedy_match;
        // Decode-path logits: step s's logits come from feeding greedy token s-1, valid while the path matches.
        for (int32_t s = 1; s < n_steps && s <= cr.greedy_match && s < first_tie_step; ++s) {
          const auto& row = steps[s - 1];
          for (const auto& pair : ref_topk[s]) {
            const int32_t id = pair[0].get<int32_t>();
            cr.decode_max_abs = std::max(cr.decode_max_abs, std::fabs(row[id] - pair[1].get<double>()));
          }
        }
        cr.pass = true;
        if (cr.greedy_match < cr.greedy_compared) {
          cr.pass = false;
          cr.why = "greedy diverged at step " + std::to_string(cr.greedy_match);
        }
        if (f32 && (cr.max_abs > kF32MaxAbs || cr.decode_max_abs > kF32MaxAbs)) {
          cr.pass = false;
          cr.why = "max |dlogit| above tolerance";
        }
        if (!f32 && cr.top1_checked_agree != cr.top1_checked) {
          cr.pass = false;
          cr.why = "top-1 differs on a row with reference margin > 1";
        }
        mr.max_abs = std::max(mr.max_abs, cr.max_abs);
        sum_abs += case_sum;
        mr.rows += cr.rows;
        mr.pass = mr.pass && cr.pass;
        if (on_case) on_case(cr);
        mr.cases.push_back(std::move(cr));
      }
    } catch (const json::exception& e) {
      return Error::Corrupt(rdir + "/manifest.json: " + e.what());
    }
    mr.mean_abs = mr.rows ? sum_abs / (static_cast<double>(mr.rows) * V) : 0;
    if (!f32 && mr.mean_abs > MeanLimit(mr.precision)) {
      mr.pass = false;
      mr.why = "mean |dlogit| above " + std::to_string(MeanLimit(mr.precision));
    }
    if (!mr.pass && mr.why.empty()) mr.why = "a case failed";
    results.push_back(std::move(mr));
  }
  return results;
}

std::string FormatCase(const CaseResult& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%-20s %-16s rows %4d  max|d| %.3e  mean|d| %.3e  top1 %d/%d (margin>1: %d/%d)  greedy %d/%d "
                "(must %d)  decode max|d| %.3e%s  %s%s%s",
                r.model.c_str(), r.name.c_str(), r.rows, r.max_abs, r.mean_abs, r.top1_agree, r.rows,
                r.top1_checked_agree, r.top1_checked, r.greedy_match, r.greedy_total, r.greedy_compared, r.decode_max_abs,
                r.rows_excluded ? (" excluded " + std::to_string(r.rows_excluded)).c_str() : "",
                r.pass ? "PASS" : "FAIL", r.why.empty() ? "" : ": ", r.why.c_str());
  return buf;
}

std::string FormatModel(const ModelResult& r) {
  if (r.skipped) return r.model + ": SKIPPED (" + r.skip_reason + ")";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s: %s  kv %s  cases %zu  rows %lld  max|d| %.3e  mean|d| %.3e%s%s",
                r.model.c_str(), r.pass ? "PASS" : "FAIL", r.kv_type.c_str(), r.cases.size(),
                static_cast<long long>(r.rows), r.max_abs, r.mean_abs, r.why.empty() ? "" : "  ", r.why.c_str());
  return buf;
}

}  // namespace rw::model
