// rewind run: greedy generation from a prompt (token ids or text), printing tokens as they come.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/command.h"
#include "apps/device_flags.h"
#include "apps/image_flags.h"
#include "apps/kv_flags.h"
#include "base/flags.h"
#include "base/progress.h"
#include "base/timer.h"
#include "model/forward.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace rw::apps {
namespace {

int32_t Argmax(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  return best;
}

int Run(int argc, char** argv) {
  FlagSet flags("run", "greedy generation (argmax, ties -> lowest id)");
  std::string model_path, tokens_text, prompt;
  int n_predict = 32, threads = 1, page_size = 32, n_batch = 512;
  bool f32_kv = false, ids = false, ignore_eos = true;
  flags.Add("model", 'm', &model_path, "GGUF model file");
  flags.Add("tokens", 0, &tokens_text, "prompt as token ids, \"1 2 3\" or \"1,2,3\"");
  flags.Add("prompt", 'p', &prompt, "prompt text (tokenized with parse_special=true, no BOS added)");
  flags.Add("n-predict", 'n', &n_predict, "tokens to generate");
  flags.Add("threads", 't', &threads, "threads");
  flags.Add("page-size", 0, &page_size, "KV page size in tokens");
  flags.Add("batch-size", 'b', &n_batch, "prompt tokens per forward (a long prompt logs its progress)");
  flags.Add("f32-kv", 0, &f32_kv, "F32 KV cache instead of F16 (same as --kv-type f32)");
  engine::EngineConfig kv_flags;
  AddKvTypeFlags(flags, &kv_flags);
  flags.Add("ids", 0, &ids, "print token ids even when text is available");
  flags.Add("ignore-eos", 0, &ignore_eos, "keep generating after an end-of-generation token");
  std::string image;
  flags.Add("image", 0, &image,
            "an image (PNG or JPEG) for the prompt, with --mmproj: it goes where -p has <__media__>, else first");
  ImageFlags image_flags;
  image_flags.Declare(flags);
  DeviceFlags dev;
  dev.Declare(flags);
  Status st = flags.Parse(argc, argv);
  if (st.ok() && dev.list && !flags.help_requested()) {
    PrintDevices();
    return 0;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "rewind run: %s\n%s", st.error().message.c_str(), flags.Help().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (model_path.empty() || (tokens_text.empty() == prompt.empty())) {
    std::fprintf(stderr, "rewind run: need -m MODEL and exactly one of --tokens / -p\n");
    return 2;
  }
  if (n_predict < 0 || page_size <= 0 || n_batch <= 0) {
    std::fprintf(stderr, "rewind run: -n must be >= 0, --page-size and --batch-size > 0\n");
    return 2;
  }
  if (f32_kv) kv_flags.kv_type = "f32";
  auto kv_types = kv_flags.CacheTypes();
  if (!kv_types.ok()) {
    std::fprintf(stderr, "rewind run: %s\n", kv_types.error().message.c_str());
    return 2;
  }
  auto device = dev.Resolve();
  if (!device.ok()) {
    std::fprintf(stderr, "rewind run: %s\n", device.error().message.c_str());
    return 2;
  }
  model::LoadOptions lo;
  lo.n_threads = threads;
  lo.device = *device;
  lo.n_gpu_layers = dev.n_gpu_layers;
  auto loaded = model::Model::Load(model_path, lo);
  if (!loaded.ok()) {
    std::fprintf(stderr, "rewind run: %s\n", loaded.error().ToString().c_str());
    return 1;
  }
  model::Model& m = **loaded;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (auto t = tokenizer::Tokenizer::FromGguf(m.file()); t.ok()) tok = std::move(t).value();
  std::vector<int32_t> input;
  if (!tokens_text.empty()) {
    auto parsed = ParseIntList(tokens_text);
    if (!parsed.ok()) {
      std::fprintf(stderr, "rewind run: --tokens: %s\n", parsed.error().message.c_str());
      return 2;
    }
    input = *parsed;
  } else {
    if (!tok) {
      std::fprintf(stderr, "rewind run: the model has no usable tokenizer; use --tokens\n");
      return 1;
    }
    input = tok->Encode(prompt, /*parse_special=*/true, /*add_special=*/false);
  }
  // --image: the image's rows replace its placeholder ids, positions follow its layout (docs/images.md).
  RunImagePrompt with_image;
  model::SeqImages images;
  std::unique_ptr<vision::ImagePipeline> pipeline;
  if (!image.empty()) {
    if (image_flags.mmproj.empty() || prompt.empty() || !tok) {
      std::fprintf(stderr, "rewind run: --image needs --mmproj FILE and a text prompt -p\n");
      return 2;
    }
    engine::EngineInfo info;
    info.arch = m.config().arch_name;
    info.n_embd = m.config().n_embd;
    info.images = (m.config().arch == model::Arch::kQwen35 || m.config().arch == model::Arch::kQwen35Moe) &&
                  m.config().imrope;
    auto p = image_flags.Load(info, threads);
    Expected<RunImagePrompt> built = p.ok() ? BuildRunImagePrompt(prompt, {image}, **p, [&](const std::string& t) {
      return tok->Encode(t, /*parse_special=*/true, /*add_special=*/false);
    })
                                            : Expected<RunImagePrompt>(p.error());
    if (!built.ok()) {
      std::fprintf(stderr, "rewind run: %s\n", built.error().ToString().c_str());
      return 1;
    }
    pipeline = std::move(*p);
    with_image = std::move(*built);
    input = with_image.tokens;
    images = std::move(model::SeqImages::Make(with_image.spans)).value();
    std::fprintf(stderr, "image: %d x %d tokens, vision tower %.1f ms\n", with_image.spans[0].nx,
                 with_image.spans[0].ny, with_image.encode_ms);
  }
  if (input.empty()) {
    std::fprintf(stderr, "rewind run: empty prompt\n");
    return 2;
  }
  const int32_t total = static_cast<int32_t>(input.size()) + n_predict;
  const int32_t n_pages = (total + page_size - 1) / page_size;
  auto kv = model::KvStorage::Create(m.MakeKvConfig(n_pages, page_size, *kv_types));
  auto states = model::StateStorage::Create(m.MakeStateShape(), 1);
  if (!kv.ok() || !states.ok()) {
    std::fprintf(stderr, "rewind run: %s\n", kv.ok() ? "cannot allocate the states" : kv.error().message.c_str());
    return 1;
  }
  std::vector<int32_t> pages(n_pages);
  for (int32_t i = 0; i < n_pages; ++i) pages[i] = i;
  const bool text = tok && !ids;
  std::unique_ptr<tokenizer::StreamDecoder> dec;
  if (text) dec = std::make_unique<tokenizer::StreamDecoder>(*tok);

  model::ForwardOutput out;
  const double t0 = NowSeconds();
  // The prompt in chunks of --batch-size (same logits however it is split, I1), with a progress line when
  // long.
  Progress progress("prompt", static_cast<double>(input.size()), "tokens");
  for (size_t done = 0; done < input.size();) {
    const size_t n = std::min(input.size() - done, static_cast<size_t>(n_batch));
    model::BatchSeq b;
    b.state_in = done == 0 ? -1 : 0;
    b.state_out = 0;
    b.pages = pages;
    b.pos0 = static_cast<int32_t>(done);
    b.tokens = std::span<const int32_t>(input.data() + done, n);
    b.images = images.empty() ? nullptr : &images;
    if (Status s = m.Forward({&b, 1}, **kv, **states, &out); !s.ok()) {
      std::fprintf(stderr, "rewind run: %s\n", s.error().ToString().c_str());
      return 1;
    }
    done += n;
    if (done < input.size()) progress.Update(static_cast<double>(done));
  }
  progress.Finish(static_cast<double>(input.size()));
  const double t1 = NowSeconds();
  int32_t pos = static_cast<int32_t>(input.size());
  int generated = 0;
  for (int i = 0; i < n_predict; ++i) {
    int32_t next = Argmax(out.Row(0));
    ++generated;
    if (text) {
      std::fputs(dec->Feed(next).c_str(), stdout);
    } else {
      std::printf("%d ", next);
    }
    std::fflush(stdout);
    if (!ignore_eos && tok && tok->IsEog(next)) break;
    if (i + 1 == n_predict) break;
    model::BatchSeq d;
    d.state_in = 0;
    d.state_out = 0;
    d.pages = pages;
    d.pos0 = pos++;
    d.tokens = {&next, 1};
    d.images = images.empty() ? nullptr : &images;
    if (Status s = m.Forward({&d, 1}, **kv, **states, &out); !s.ok()) {
      std::fprintf(stderr, "\nrewind run: %s\n", s.error().ToString().c_str());
      return 1;
    }
  }
  if (text) std::fputs(dec->Flush().c_str(), stdout);
  const double t2 = NowSeconds();
  std::printf("\n");
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tok/s); generated %d tokens in %.3f s (%.1f tok/s)\n",
               input.size(), t1 - t0, input.size() / std::max(1e-9, t1 - t0), generated, t2 - t1,
               generated > 1 ? (generated - 1) / std::max(1e-9, t2 - t1) : 0.0);
  return 0;
}

}  // namespace

REWIND_COMMAND("run", "greedy generation from a prompt", Run);

}  // namespace rw::apps
