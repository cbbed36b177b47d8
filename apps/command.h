// Subcommands register themselves: each apps/cmd_*.cc defines one command with REWIND_COMMAND.
#pragma once

#include <string>
#include <vector>

namespace rw::apps {

// argv[0] is the command name ("run"), flags follow.
using CommandFn = int (*)(int argc, char** argv);

struct Command {
  const char* name;
  const char* summary;
  CommandFn fn;
};

std::vector<Command>& Commands();

struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* summary, CommandFn fn) { Commands().push_back({name, summary, fn}); }
};

}  // namespace rw::apps

#define REWIND_COMMAND(name, summary, fn) \
  static ::rw::apps::CommandRegistrar REWIND_CMD_##fn(name, summary, fn)
