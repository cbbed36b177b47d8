#include "gpu/hazards.h"

#include <map>
#include <set>

namespace rw::gpu {

uint32_t WritableBindings(const uint32_t* words, size_t n_words) {
  // SPIR-V opcodes and decorations (the SPIR-V specification, 3.32 and 3.20).
  constexpr uint32_t kOpTypeStruct = 30, kOpTypePointer = 32, kOpVariable = 59, kOpDecorate = 71,
                     kOpMemberDecorate = 72;
  constexpr uint32_t kNonWritable = 24, kBinding = 33;
  std::map<uint32_t, uint32_t> binding_of, pointee, type_of, members;
  std::set<uint32_t> nonwritable_vars;
  std::map<uint32_t, std::set<uint32_t>> nonwritable_members;
  for (size_t w = 5; w < n_words;) {
    const uint32_t op = words[w] & 0xFFFF, len = words[w] >> 16;
    if (len == 0 || w + len > n_words) break;
    const uint32_t* a = words + w + 1;  // operands
    if (op == kOpDecorate && len >= 3) {
      if (a[1] == kBinding && len >= 4) binding_of[a[0]] = a[2];
      if (a[1] == kNonWritable) nonwritable_vars.insert(a[0]);
    } else if (op == kOpMemberDecorate && len >= 4 && a[2] == kNonWritable) {
      nonwritable_members[a[0]].insert(a[1]);
    } else if (op == kOpTypeStruct && len >= 2) {
      members[a[0]] = len - 2;
    } else if (op == kOpTypePointer && len >= 4) {
      pointee[a[0]] = a[2];
    } else if (op == kOpVariable && len >= 4) {
      type_of[a[1]] = a[0];
    }
    w += len;
  }
  uint32_t mask = 0;
  for (const auto& [var, binding] : binding_of) {
    if (binding >= 32) continue;
    bool readonly = nonwritable_vars.count(var) > 0;
    if (!readonly && type_of.count(var) && pointee.count(type_of[var])) {
      const uint32_t st = pointee[type_of[var]];
      const auto m = members.find(st);
      const auto nw = nonwritable_members.find(st);
      readonly = m != members.end() && m->second > 0 && nw != nonwritable_members.end() && nw->second.size() == m->second;
    }
    if (!readonly) mask |= 1u << binding;
  }
  return mask;
}

}  // namespace rw::gpu
