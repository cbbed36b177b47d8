// ggml tensor type table (../shared/spec/gguf-and-quants.md section 2).
#include "gguf/types.h"

namespace rw::gguf {
namespace {

// Indexed by type id; name == nullptr marks an unknown or removed id.
// clang-format off
constexpr TypeInfo kTypes[] = {
    {"F32", 1, 4},        {"F16", 1, 2},        {"Q4_0", 32, 18},    {"Q4_1", 32, 20},
    {nullptr, 0, 0},      {nullptr, 0, 0},      {"Q5_0", 32, 22},    {"Q5_1", 32, 24},
    {"Q8_0", 32, 34},     {"Q8_1", 32, 36},     {"Q2_K", 256, 84},   {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},   {"Q5_K", 256, 176},   {"Q6_K", 256, 210},  {"Q8_K", 256, 292},
    {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74},  {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},   {"IQ3_S", 256, 110},  {"IQ2_S", 256, 82},  {"IQ4_XS", 256, 136},
    {"I8", 1, 1},         {"I16", 1, 2},        {"I32", 1, 4},       {"I64", 1, 8},
    {"F64", 1, 8},        {"IQ1_M", 256, 56},   {"BF16", 1, 2},      {nullptr, 0, 0},
    {nullptr, 0, 0},      {nullptr, 0, 0},      {"TQ1_0", 256, 54},  {"TQ2_0", 256, 66},
    {nullptr, 0, 0},      {nullptr, 0, 0},      {nullptr, 0, 0},     {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},    {"Q1_0", 128, 18},    {"Q2_0", 64, 18},
};
// clang-format on
constexpr uint32_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);
static_assert(kNumTypes == 43);

}  // namespace

const TypeInfo* GetTypeInfo(uint32_t type_id) {
  if (type_id >= kNumTypes || kTypes[type_id].name == nullptr) return nullptr;
  return &kTypes[type_id];
}

const char* TypeName(TensorType t) {
  const TypeInfo* info = GetTypeInfo(t);
  return info ? info->name : "?";
}

}  // namespace rw::gguf
