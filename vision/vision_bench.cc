// The vision tower's speed on one image: decode, prepare (smart resize, normalisation) once, then R encodes,
// each timed in wall and process CPU time (on a shared machine the wall clock also counts other processes'
// turns). Prints every run, the medians and a digest of the output bits (the same for any thread count, I1).
//
//   build/vision/vision_bench --mmproj MMPROJ.gguf --image IMAGE.png [-t THREADS] [-r RUNS] [--attention]
//
// --attention times one block's attention alone (random inputs of the image's shape) with every ISA twin the
// CPU runs, instead of the whole tower.
//
// scripts/bench-vision.sh runs it next to llama.cpp's llama-mtmd-cli on the same files (docs/images.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "base/file.h"
#include "base/flags.h"
#include "vision/attention.h"
#include "vision/encoder.h"
#include "vision/image_decode.h"
#include "vision/mmproj.h"

namespace {

double Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// FNV-1a over the output floats' bits.
uint64_t Digest(const std::vector<float>& rows) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const uint8_t*>(rows.data());
  for (size_t i = 0; i < rows.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// One block's attention on random q, k, v of n patches, each ISA twin the CPU runs, interleaved.
int TimeAttention(const rw::vision::VisionConfig& c, int32_t n, int threads, int runs) {
  using rw::vision::AttnIsa;
  const int32_t H = c.n_head, D = c.d_head;
  std::vector<float> qkv(static_cast<size_t>(n) * 3 * H * D), out(static_cast<size_t>(n) * H * D);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : qkv) x = dist(rng);
  rw::kernels::ThreadPool pool(threads);
  std::vector<AttnIsa> isas;
  for (AttnIsa isa : {AttnIsa::kAvx512, AttnIsa::kAvx2})
    if (rw::vision::AttnIsaAvailable(isa)) isas.push_back(isa);
  if (isas.empty()) isas.push_back(AttnIsa::kScalar);  // the slow twin only where there is no other
  std::vector<std::vector<double>> wall(isas.size()), cpu(isas.size());
  for (int r = 0; r < runs; ++r)
    for (size_t i = 0; i < isas.size(); ++i) {
      const double w0 = Now(CLOCK_MONOTONIC), c0 = Now(CLOCK_PROCESS_CPUTIME_ID);
      rw::vision::VisionAttention(qkv.data(), n, H, D, 1.0f / std::sqrt(static_cast<float>(D)), out.data(),
                                  &pool, nullptr, isas[i]);
      wall[i].push_back(Now(CLOCK_MONOTONIC) - w0);
      cpu[i].push_back(Now(CLOCK_PROCESS_CPUTIME_ID) - c0);
    }
  const double flops = 4.0 * n * n * H * D;
  for (size_t i = 0; i < isas.size(); ++i)
    std::printf(
        "attention %s: %d patches, %d heads of %d: median %.3f s wall, %.3f s CPU (%.1f GFLOP/s per CPU s)\n",
        rw::vision::AttnIsaName(isas[i]), n, H, D, Median(wall[i]), Median(cpu[i]),
        flops / Median(cpu[i]) * 1e-9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mmproj_path, image_path;
  int threads = 2, runs = 3, min_tokens = 8, max_tokens = 4096;
  bool attention_only = false;
  rw::FlagSet flags("vision_bench", "time the vision tower's encode of one image (docs/images.md)");
  flags.Add("mmproj", 0, &mmproj_path, "qwen3vl_merger vision projector GGUF (required)");
  flags.Add("image", 0, &image_path, "PNG or JPEG image (required)");
  flags.Add("threads", 't', &threads, "threads");
  flags.Add("runs", 'r', &runs, "timed encodes; the medians are reported");
  flags.Add("image-min-tokens", 0, &min_tokens, "minimum merged tokens per image (llama.cpp's default)");
  flags.Add("image-max-tokens", 0, &max_tokens, "maximum merged tokens per image (llama.cpp's default)");
  flags.Add(
      "attention", 0, &attention_only,
      "instead: time one block's attention alone (random inputs of the image's shape) per vector ISA twin");
  if (const rw::Status st = flags.Parse(argc, argv); !st.ok()) {
    std::fprintf(stderr, "vision_bench: %s\n%s", st.error().ToString().c_str(), flags.Help().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (mmproj_path.empty() || image_path.empty() || runs < 1 || threads < 1) {
    std::fprintf(stderr, "vision_bench: --mmproj and --image are required, -t and -r at least 1\n%s",
                 flags.Help().c_str());
    return 2;
  }
  auto mm = rw::vision::Mmproj::Load(mmproj_path);
  if (!mm.ok()) {
    std::fprintf(stderr, "vision_bench: %s\n", mm.error().ToString().c_str());
    return 1;
  }
  auto bytes = rw::ReadFileToString(image_path);
  if (!bytes.ok()) {
    std::fprintf(stderr, "vision_bench: %s\n", bytes.error().ToString().c_str());
    return 1;
  }
  auto img = rw::vision::DecodeImage({reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()},
                                     rw::vision::ImageLimits{});
  if (!img.ok()) {
    std::fprintf(stderr, "vision_bench: %s\n", img.error().ToString().c_str());
    return 1;
  }
  const rw::vision::PreparedImage prepared =
      rw::vision::Prepare(*img, (*mm)->config(), rw::vision::PreprocessOptions{min_tokens, max_tokens});
  if (attention_only) return TimeAttention((*mm)->config(), prepared.nx() * prepared.ny() * 4, threads, runs);
  const rw::vision::VisionEncoder enc(**mm, threads);
  std::printf("image %d x %d -> %d x %d px, %d x %d tokens (%d patches), %d threads\n", img->width,
              img->height, prepared.width, prepared.height, prepared.nx(), prepared.ny(),
              prepared.nx() * prepared.ny() * 4, threads);
  std::vector<double> wall, cpu;
  uint64_t digest = 0;
  for (int r = 0; r < runs; ++r) {
    const double w0 = Now(CLOCK_MONOTONIC), c0 = Now(CLOCK_PROCESS_CPUTIME_ID);
    auto out = enc.Encode(prepared);
    const double w1 = Now(CLOCK_MONOTONIC), c1 = Now(CLOCK_PROCESS_CPUTIME_ID);
    if (!out.ok()) {
      std::fprintf(stderr, "vision_bench: %s\n", out.error().ToString().c_str());
      return 1;
    }
    digest = Digest(out->rows);
    wall.push_back(w1 - w0);
    cpu.push_back(c1 - c0);
    std::printf("run %d: encode %.2f s wall, %.2f s CPU, output digest %016llx\n", r + 1, w1 - w0, c1 - c0,
                static_cast<unsigned long long>(digest));
    std::fflush(stdout);
  }
  std::printf("rewind encode: median %.2f s wall, %.2f s CPU over %d runs (digest %016llx)\n", Median(wall),
              Median(cpu), runs, static_cast<unsigned long long>(digest));
  return 0;
}
