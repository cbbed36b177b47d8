// libFuzzer target for the GGUF reader: any byte string must give a File or an Error, never a crash, a
// sanitizer report or a huge allocation. Built only with -DREWIND_FUZZ=ON and clang (see docs/gguf.md).
#include <cstddef>
#include <cstdint>

#include "gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = rw::gguf::File::FromBuffer(std::span<const uint8_t>(data, size));
  if (!f.ok()) return 0;
  const rw::gguf::File& file = **f;
  // Touch everything the parser produced.
  uint64_t sink = file.Fingerprint();
  for (const auto& [key, value] : file.metadata()) {
    (void)file.GetU32(key);
    (void)file.GetString(key);
    (void)file.GetIntArray(key);
    (void)file.GetF32Array(key);
    (void)file.GetStringArray(key);
    sink += value.array.size();
  }
  for (const rw::gguf::TensorInfo& t : file.tensors()) {
    sink += t.row_bytes() + t.ShapeString().size();
    if (t.nbytes > 0) sink += t.data[0] + t.data[t.nbytes - 1];
  }
  volatile uint64_t keep = sink;
  (void)keep;
  return 0;
}
