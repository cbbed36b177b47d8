#include "memory/data_ops.h"

namespace rw::memory {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

struct Printer {
  std::string operator()(const CopyPageOp& o) const { return "copy_page " + S(o.from) + "->" + S(o.to); }
  std::string operator()(const ZeroStateOp& o) const { return "zero_state slot " + S(o.slot); }
  std::string operator()(const CopyStateOp& o) const { return "copy_state " + S(o.from) + "->" + S(o.to); }
  std::string operator()(const RestoreCheckpointOp& o) const {
    return "restore ckpt " + S(o.ckpt) + "->slot " + S(o.slot);
  }
  std::string operator()(const SaveCheckpointOp& o) const { return "save slot " + S(o.slot) + "->ckpt " + S(o.ckpt); }
  std::string operator()(const ReplayStateOp& o) const {
    return "replay " + S(o.count) + " from slot " + S(o.from) + "->slot " + S(o.to);
  }
  std::string operator()(const FreeCheckpointOp& o) const { return "free ckpt " + S(o.ckpt); }
};

}  // namespace

std::string ToString(const DataOp& op) { return std::visit(Printer{}, op); }

std::string ToString(const std::vector<DataOp>& ops) {
  std::string out;
  for (const DataOp& op : ops) {
    if (!out.empty()) out += "; ";
    out += ToString(op);
  }
  return out;
}

}  // namespace rw::memory
