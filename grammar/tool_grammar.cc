#include "grammar/tool_grammar.h"

#include <set>
#include <vector>

#include "grammar/json_schema.h"

namespace rw::grammar {
namespace {

using json = nlohmann::ordered_json;

// A raw parameter value of the XML format: text without "</" (which would end the parameter early).
constexpr const char* kXmlText = R"([^<] | "<" [^/])";

// The value of a string parameter written raw (XML format): enum values as literals, else text.
Expected<std::string> XmlStringValue(SchemaConverter* c, const json& schema, const std::string& name) {
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    static const std::set<std::string> ok = {"type",     "enum",      "description", "title", "default",
                                             "examples", "minLength", "maxLength",   "const"};
    if (!ok.count(it.key()))
      return Error::InvalidArgument("JSON schema: '" + it.key() +
                                    "' on a string tool parameter is not supported");
  }
  if (schema.contains("const") && schema["const"].is_string())
    return c->Add(name, GbnfLiteral(schema["const"].get<std::string>()));
  if (schema.contains("enum")) {
    std::string body;
    for (const auto& v : schema["enum"]) {
      if (!v.is_string()) return Error::InvalidArgument("JSON schema: a string enum with a non-string value");
      body += (body.empty() ? "" : " | ") + GbnfLiteral(v.get<std::string>());
    }
    if (body.empty()) return Error::InvalidArgument("JSON schema: an empty 'enum'");
    return c->Add(name, body);
  }
  std::string ch = c->Add("xml-char", kXmlText);
  int64_t lo = schema.value("minLength", 0), hi = schema.value("maxLength", -1);
  if (lo < 0 || lo > 1000 || hi > 1000)
    return Error::InvalidArgument("JSON schema: string length bounds out of range");
  return c->Add(name, ch + "{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "}");
}

bool IsPlainString(const json& schema) {
  return schema.is_object() && schema.contains("type") && schema["type"] == "string";
}

// A function's parameter schemas (in schema order) and the names of the required ones.
const json& Properties(const json& params) {
  static const json empty = json::object();
  return params.is_object() && params.contains("properties") ? params["properties"] : empty;
}
std::set<std::string> Required(const json& params) {
  std::set<std::string> required;
  if (params.is_object() && params.contains("required") && params["required"].is_array())
    for (const auto& r : params["required"])
      if (r.is_string()) required.insert(r.get<std::string>());
  return required;
}

Expected<std::string> XmlFunction(SchemaConverter* c, const std::string& fn, const json& params,
                                  const json& root) {
  const std::string base = "fn-" + fn;
  std::string body = GbnfLiteral("<function=" + fn + ">\n");
  const json& props = Properties(params);
  const std::set<std::string> required = Required(params);
  for (auto it = props.begin(); it != props.end(); ++it) {
    const std::string pname = base + "-" + it.key();
    std::string value;
    if (IsPlainString(it.value())) {
      REWIND_ASSIGN_OR_RETURN(value, XmlStringValue(c, it.value(), pname + "-value"));
    } else {
      REWIND_ASSIGN_OR_RETURN(value, c->Rule(it.value(), pname + "-value", root));
    }
    std::string p = c->Add(pname, GbnfLiteral("<parameter=" + it.key() + ">\n") + " " + value + " " +
                                      GbnfLiteral("\n</parameter>\n"));
    body += " " + (required.count(it.key()) ? p : p + "?");
  }
  body += " " + GbnfLiteral("</function>\n");
  return c->Add(base, body);
}

Expected<std::string> HermesFunction(SchemaConverter* c, const std::string& fn, const json& params,
                                     const json& root) {
  json schema = params.is_object() ? params : json::object({{"type", "object"}});
  REWIND_ASSIGN_OR_RETURN(std::string args, c->Rule(schema, "fn-" + fn + "-args", root));
  return c->Add("fn-" + fn,
                GbnfLiteral("{\"name\": " + json(fn).dump() + ", \"arguments\": ") + " " + args + " \"}\"");
}

// Kimi: "functions.NAME:" index "<|tool_call_argument_begin|>" arguments object "<|tool_call_end|>", after
// "<|tool_call_begin|>".
Expected<std::string> KimiFunction(SchemaConverter* c, const std::string& fn, const json& params, const json& root) {
  json schema = params.is_object() ? params : json::object({{"type", "object"}});
  REWIND_ASSIGN_OR_RETURN(std::string args, c->Rule(schema, "fn-" + fn + "-args", root));
  return c->Add("fn-" + fn, GbnfLiteral("functions." + fn + ":") + " [0-9]{1,3} " +
                                GbnfLiteral("<|tool_call_argument_begin|>") + " " + args + " " +
                                GbnfLiteral("<|tool_call_end|>"));
}

// LFM2: NAME(KEY=VALUE, ...) with the properties in schema order, optional ones left out or written, separated
// by ", "; values in JSON spelling (which the Python-style parser reads: chat/tool_call_pythonic.h).
Expected<std::string> PythonicFunction(SchemaConverter* c, const std::string& fn, const json& params,
                                       const json& root) {
  const std::string base = "fn-" + fn;
  const json& props = Properties(params);
  const std::set<std::string> required = Required(params);
  std::vector<std::string> kv;
  std::vector<bool> req;
  for (auto it = props.begin(); it != props.end(); ++it) {
    const std::string pname = base + "-" + it.key();
    REWIND_ASSIGN_OR_RETURN(std::string value, c->Rule(it.value(), pname + "-value", root));
    kv.push_back(c->Add(pname, GbnfLiteral(it.key() + "=") + " " + value));
    req.push_back(required.count(it.key()) > 0);
  }
  // rest[i]: parameters i.. after one was written (each with its ", "); args[i]: parameters i.. when none was.
  const size_t n = kv.size();
  std::vector<std::string> rest(n + 1), args(n + 1);
  for (size_t i = n; i-- > 0;) {
    const std::string tail = rest[i + 1].empty() ? "" : " " + rest[i + 1];
    const std::string sep = "\", \" " + kv[i];
    rest[i] = c->Add(base + "-rest" + std::to_string(i), (req[i] ? sep : "( " + sep + " )?") + tail);
    const std::string take = kv[i] + tail;
    args[i] = c->Add(base + "-args" + std::to_string(i),
                     req[i] ? take : args[i + 1].empty() ? "( " + take + " )?" : "( " + take + " | " + args[i + 1] + " )");
  }
  return c->Add(base, GbnfLiteral(fn + "(") + (args[0].empty() ? "" : " " + args[0]) + " \")\"");
}

}  // namespace

Expected<std::string> ToolCallGbnf(const json& tools, const ToolGrammarOptions& o) {
  if (!tools.is_array() || tools.empty()) return Error::InvalidArgument("forced tool calls need 'tools'");
  SchemaConverter c;
  std::string alts;
  bool found = false;
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string()) continue;
    const std::string name = f["name"].get<std::string>();
    if (!o.function.empty() && name != o.function) continue;
    found = true;
    const json params = f.contains("parameters") ? f["parameters"] : json::object();
    Expected<std::string> rule = o.format == ToolCallFormat::kQwenXml       ? XmlFunction(&c, name, params, params)
                                 : o.format == ToolCallFormat::kLfm2Pythonic ? PythonicFunction(&c, name, params, params)
                                 : o.format == ToolCallFormat::kKimi         ? KimiFunction(&c, name, params, params)
                                                                             : HermesFunction(&c, name, params, params);
    if (!rule.ok()) return Error::InvalidArgument("tool '" + name + "': " + rule.error().message);
    alts += (alts.empty() ? "" : " | ") + *rule;
  }
  if (!found) {
    return Error::InvalidArgument(o.function.empty()
                                      ? "no function among 'tools'"
                                      : "tool_choice names '" + o.function + "', which is not in 'tools'");
  }
  std::string fns = c.Add("tool-fn", alts);
  if (o.format == ToolCallFormat::kKimi) {  // one section holding every call
    const std::string call = c.Add("tool-call", "\"<|tool_call_begin|>\" " + fns);
    c.Add("root", "\"<|tool_calls_section_begin|>\" " + call + (o.parallel ? " " + call + "*" : "") +
                      " \"<|tool_calls_section_end|>\"");
  } else if (o.format == ToolCallFormat::kNemotronArray || o.format == ToolCallFormat::kLfm2Pythonic) {
    // one block holding every call
    std::string list = o.parallel ? fns + " ( \", \" " + fns + " )*" : fns;
    c.Add("root", o.format == ToolCallFormat::kNemotronArray
                      ? "\"<TOOLCALL>[\" " + list + " \"]</TOOLCALL>\""
                      : "\"<|tool_call_start|>[\" " + list + " \"]<|tool_call_end|>\"");
  } else {
    std::string call = o.format == ToolCallFormat::kQwenXml
                           ? c.Add("tool-call", "\"<tool_call>\\n\" " + fns + " \"</tool_call>\"")
                           : c.Add("tool-call", "\"<tool_call>\\n\" " + fns + " \"\\n</tool_call>\"");
    c.Add("root", o.parallel ? call + " ( \"\\n\" " + call + " )*" : call);
  }
  return o.thinking_open ? AfterReasoning(c.Gbnf()) : c.Gbnf();
}

std::string AfterReasoning(const std::string& gbnf) {
  std::string out;
  size_t pos = 0;
  while (pos < gbnf.size()) {
    size_t nl = gbnf.find('\n', pos);
    std::string line = gbnf.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos + 1);
    if (line.rfind("root ::=", 0) == 0) line = "answer-root ::=" + line.substr(8);
    out += line;
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  // Reasoning text cannot contain "</t", so it ends at the first </think>.
  out += "reasoning-text ::= ( [^<] | \"<\" ( [^/] | \"/\" [^t] ) )*\n";
  out += "root ::= reasoning-text \"</think>\" [ \\n]{0,4} answer-root\n";
  return out;
}

}  // namespace rw::grammar
