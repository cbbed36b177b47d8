#include "base/flags.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sstream>

namespace rw {
namespace {

Expected<int64_t> ParseInt(const std::string& name, const std::string& s) {
  if (s.empty()) return Error::InvalidArgument("--" + name + ": expected an integer, got an empty value");
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return Error::InvalidArgument("--" + name + ": expected an integer, got '" + s + "'");
  return static_cast<int64_t>(v);
}

Expected<double> ParseDouble(const std::string& name, const std::string& s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || *end != '\0')
    return Error::InvalidArgument("--" + name + ": expected a number, got '" + s + "'");
  return v;
}

Expected<bool> ParseBool(const std::string& name, const std::string& s) {
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  return Error::InvalidArgument("--" + name + ": expected true or false, got '" + s + "'");
}

std::string Fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

void FlagSet::Add(const std::string& name, char short_name, std::string* value, const std::string& help) {
  flags_.push_back({name, short_name, help, value->empty() ? "" : *value, false, false,
                    [value](const std::string& s) -> Status {
                      *value = s;
                      return Status::Ok();
                    },
                    false, "", {}});
}

void FlagSet::Add(const std::string& name, char short_name, int64_t* value, const std::string& help) {
  flags_.push_back({name, short_name, help, std::to_string(*value), false, false,
                    [value, name](const std::string& s) -> Status {
                      auto v = ParseInt(name, s);
                      if (!v.ok()) return v.error();
                      *value = *v;
                      return Status::Ok();
                    },
                    false, "", {}});
}

void FlagSet::Add(const std::string& name, char short_name, int* value, const std::string& help) {
  flags_.push_back({name, short_name, help, std::to_string(*value), false, false,
                    [value, name](const std::string& s) -> Status {
                      auto v = ParseInt(name, s);
                      if (!v.ok()) return v.error();
                      if (*v < INT32_MIN || *v > INT32_MAX)
                        return Error::InvalidArgument("--" + name + ": value out of range: " + s);
                      *value = static_cast<int>(*v);
                      return Status::Ok();
                    },
                    false, "", {}});
}

void FlagSet::Add(const std::string& name, char short_name, double* value, const std::string& help) {
  flags_.push_back({name, short_name, help, Fmt(*value), false, false,
                    [value, name](const std::string& s) -> Status {
                      auto v = ParseDouble(name, s);
                      if (!v.ok()) return v.error();
                      *value = *v;
                      return Status::Ok();
                    },
                    false, "", {}});
}

void FlagSet::Add(const std::string& name, char short_name, bool* value, const std::string& help) {
  flags_.push_back({name, short_name, help, *value ? "true" : "false", true, false,
                    [value, name](const std::string& s) -> Status {
                      auto v = ParseBool(name, s);
                      if (!v.ok()) return v.error();
                      *value = *v;
                      return Status::Ok();
                    },
                    false, "", {}});
}

void FlagSet::AddOptionalValue(const std::string& name, char short_name, std::string* value,
                               const std::string& implicit, const std::string& help) {
  Add(name, short_name, value, help);
  flags_.back().optional_value = true;
  flags_.back().implicit_value = implicit;
}

void FlagSet::Alias(const std::string& spelling, const std::string& name, bool negate) {
  aliases_.push_back({spelling, name, negate});
  if (Flag* f = Find(name)) f->aliases.push_back(spelling);
}

void FlagSet::Positional(const std::string& name, std::string* value, const std::string& help, bool required) {
  positionals_.push_back({name, value, help, required});
}

FlagSet::Flag* FlagSet::Find(const std::string& name) {
  for (auto& f : flags_)
    if (f.name == name) return &f;
  return nullptr;
}

FlagSet::Flag* FlagSet::FindShort(char c) {
  for (auto& f : flags_)
    if (f.short_name == c) return &f;
  return nullptr;
}

bool FlagSet::IsSet(const std::string& name) const {
  for (const auto& f : flags_)
    if (f.name == name) return f.set;
  return false;
}

Status FlagSet::Parse(int argc, char** argv, int first) {
  size_t pos_index = 0;
  bool only_positional = false;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (!only_positional && arg == "--") {
      only_positional = true;
      continue;
    }
    if (!only_positional && (arg == "--help" || arg == "-h")) {
      help_requested_ = true;
      return Status::Ok();
    }
    if (!only_positional && arg.size() > 1 && arg[0] == '-' && !(arg.size() > 1 && (std::isdigit(arg[1]) || arg[1] == '.'))) {
      Flag* flag = nullptr;
      std::string value;
      bool has_value = false;
      bool negated = false;
      const AliasEntry* alias = nullptr;
      {
        size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
        std::string spelling = arg.substr(0, eq);
        for (const auto& a : aliases_)
          if (a.spelling == spelling) alias = &a;
        if (alias) {
          flag = Find(alias->name);
          if (!flag) return Error::InvalidArgument("flag alias '" + arg + "' names no flag");
          if (eq != std::string::npos) {
            value = arg.substr(eq + 1);
            has_value = true;
          }
          negated = alias->negate;
        }
      }
      if (alias) {
        // resolved above
      } else if (arg.rfind("--", 0) == 0) {
        std::string body = arg.substr(2);
        size_t eq = body.find('=');
        if (eq != std::string::npos) {
          value = body.substr(eq + 1);
          body = body.substr(0, eq);
          has_value = true;
        }
        flag = Find(body);
        if (!flag && body.rfind("no-", 0) == 0) {
          flag = Find(body.substr(3));
          if (flag && flag->is_bool && !has_value) negated = true;
          else flag = nullptr;
        }
        if (!flag) return Error::InvalidArgument("unknown flag '" + arg + "' (see " + command_ + " --help)");
      } else {
        flag = arg.size() == 2 ? FindShort(arg[1]) : nullptr;
        if (!flag) return Error::InvalidArgument("unknown flag '" + arg + "' (see " + command_ + " --help)");
      }
      if (flag->is_bool) {
        if (!has_value) value = negated ? "false" : "true";
      } else if (!has_value && flag->optional_value) {
        bool next_is_value = i + 1 < argc && !(argv[i + 1][0] == '-' && argv[i + 1][1] != '\0' &&
                                               !std::isdigit(static_cast<unsigned char>(argv[i + 1][1])));
        value = next_is_value ? argv[++i] : flag->implicit_value;
      } else if (!has_value) {
        if (i + 1 >= argc) return Error::InvalidArgument("flag --" + flag->name + " needs a value");
        value = argv[++i];
      }
      Status s = flag->assign(value);
      if (!s.ok()) return s;
      flag->set = true;
      continue;
    }
    if (pos_index >= positionals_.size())
      return Error::InvalidArgument("unexpected argument '" + arg + "' (see " + command_ + " --help)");
    *positionals_[pos_index++].value = arg;
  }
  for (size_t p = pos_index; p < positionals_.size(); ++p)
    if (positionals_[p].required)
      return Error::InvalidArgument("missing argument " + positionals_[p].name + " (see " + command_ + " --help)");
  return Status::Ok();
}

std::string FlagSet::Help() const {
  std::ostringstream os;
  os << "usage: " << command_;
  if (!flags_.empty()) os << " [flags]";
  for (const auto& p : positionals_) os << (p.required ? " " : " [") << p.name << (p.required ? "" : "]");
  os << "\n\n" << summary_ << "\n";
  if (!positionals_.empty()) {
    os << "\narguments:\n";
    for (const auto& p : positionals_) os << "  " << p.name << "\n      " << p.help << "\n";
  }
  if (!flags_.empty()) {
    os << "\nflags:\n";
    for (const auto& f : flags_) {
      os << "  ";
      if (f.short_name) os << "-" << f.short_name << ", ";
      os << "--" << f.name;
      for (const auto& a : f.aliases) os << ", " << a;
      if (f.optional_value) os << " [VALUE]";
      else if (!f.is_bool) os << " VALUE";
      os << "\n      " << f.help;
      os << " (default: " << (f.default_text.empty() ? "none" : f.default_text) << ")\n";
    }
    os << "  -h, --help\n      print this help\n";
  }
  return os.str();
}

Expected<std::vector<int32_t>> ParseIntList(const std::string& text) {
  std::vector<int32_t> out;
  std::string cur;
  auto flush = [&]() -> Status {
    if (cur.empty()) return Status::Ok();
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(cur.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < INT32_MIN || v > INT32_MAX)
      return Error::InvalidArgument("not an integer: '" + cur + "'");
    out.push_back(static_cast<int32_t>(v));
    cur.clear();
    return Status::Ok();
  };
  for (char c : text) {
    if (c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '[' || c == ']') {
      Status s = flush();
      if (!s.ok()) return s.error();
    } else {
      cur.push_back(c);
    }
  }
  Status s = flush();
  if (!s.ok()) return s.error();
  return out;
}

}  // namespace rw
