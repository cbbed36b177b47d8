// rewind: command-line entry point. Wiring only: every subcommand lives in apps/cmd_*.cc.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "apps/command.h"
#include "apps/device_flags.h"
#include "base/version.h"

namespace rw::apps {

std::vector<Command>& Commands() {
  static std::vector<Command> commands;
  return commands;
}

namespace {

void PrintUsage() {
  std::printf(
      "rewind %s: inference engine and OpenAI-compatible server for hybrid Gated DeltaNet models\n\n"
      "usage: rewind COMMAND [flags]      (rewind COMMAND --help for the flags of one command)\n\n"
      "commands:\n",
      Version());
  auto cmds = Commands();
  std::sort(cmds.begin(), cmds.end(), [](const Command& a, const Command& b) { return std::strcmp(a.name, b.name) < 0; });
  for (const auto& c : cmds) std::printf("  %-12s %s\n", c.name, c.summary);
  std::printf(
      "\nglobal flags:\n  --version    print the version and git commit\n"
      "  --list-devices  list the devices a model can run on (cpu, vulkanN: name, memory)\n"
      "  -h, --help   print this help\n"
      "\ndocs: docs/README.md\n");
}

}  // namespace
}  // namespace rw::apps

int main(int argc, char** argv) {
  using namespace rw::apps;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    PrintUsage();
    return argc < 2 ? 1 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")) {
    std::printf("rewind %s (commit %s)\n", rw::Version(), rw::GitCommit());
    return 0;
  }
  if (!std::strcmp(argv[1], "--list-devices")) {
    PrintDevices();
    return 0;
  }
  for (const auto& c : Commands()) {
    if (argv[1] == std::string(c.name)) return c.fn(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "rewind: unknown command '%s' (see rewind --help)\n", argv[1]);
  return 2;
}
