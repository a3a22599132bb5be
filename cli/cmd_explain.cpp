// progcache explain FILE.cu: why it would miss, as the key fields that differ from the closest
// stored entry with the same program name.
#include <cstdint>
#include <cstdio>
#include <map>

#include "commands.hpp"
#include "explain.hpp"

namespace progcache::cli {
namespace {

std::string short_digest(const std::string &hex) {
  return hex.size() > 12 ? hex.substr(0, 12) + "..." : hex;
}

std::string base_name(const std::string &path) {
  return path.substr(path.rfind('/') + 1);
}

// One header field ("file PATH") that differs, in words.
void print_header_difference(const std::string &field, const std::string *old_value,
                             const std::string &value,
                             const std::map<std::string, std::string> &have) {
  const std::string path = field.substr(field.find(' ') + 1);
  if (!old_value) {
    std::printf("  header %s is read now (it was not then)\n", path.c_str());
  } else if (*old_value == "absent") {
    std::string shadowed;
    for (const auto &[g, w] : have)
      if (g != field && g.rfind("file ", 0) == 0 && w != "absent" &&
          base_name(g) == base_name(field))
        shadowed = g.substr(5);
    if (shadowed.empty())
      std::printf("  a new file %s now exists where the compile looked for a header\n",
                  path.c_str());
    else
      std::printf("  a new file %s now shadows %s\n", path.c_str(), shadowed.c_str());
  } else if (value == "absent") {
    std::printf("  header %s was removed\n", path.c_str());
  } else {
    std::printf("  header %s changed (digest %s -> %s)\n", path.c_str(),
                short_digest(*old_value).c_str(), short_digest(value).c_str());
  }
}

// One line per key field that differs, in words: headers by path, the NVRTC build by build-id.
void print_key_differences(const KeyFields &stored, const KeyFields &current,
                           uint32_t stored_nvrtc) {
  const std::map<std::string, std::string> have(stored.begin(), stored.end()),
      now(current.begin(), current.end());
  for (const auto &[f, v] : now) {
    const auto old = have.find(f);
    if (old != have.end() && old->second == v) continue;
    if (f.rfind("file ", 0) == 0 || f.rfind("probe ", 0) == 0)
      print_header_difference(f, old == have.end() ? nullptr : &old->second, v, have);
    else if (f == "nvrtc_build" && old != have.end())
      std::printf("  NVRTC build %s -> %s (the entry was compiled by NVRTC %s)\n",
                  short_digest(old->second).c_str(), short_digest(v).c_str(),
                  nvrtc_text(stored_nvrtc).c_str());
    else if (old == have.end())
      std::printf("  %-18s now %s (absent then)\n", f.c_str(), v.c_str());
    else
      std::printf("  %-18s stored %s, now %s\n", f.c_str(), old->second.c_str(), v.c_str());
  }
  for (const auto &[f, v] : have) {
    if (now.count(f)) continue;
    if (f.rfind("file ", 0) == 0 || f.rfind("probe ", 0) == 0)
      std::printf("  header %s is no longer read\n", f.substr(f.find(' ') + 1).c_str());
    else
      std::printf("  %-18s stored %s (absent now)\n", f.c_str(), v.c_str());
  }
}

size_t count_differences(const KeyFields &a, const KeyFields &b) {
  const std::map<std::string, std::string> x(a.begin(), a.end()), y(b.begin(), b.end());
  size_t diff = 0;
  for (const auto &[f, v] : y) diff += x.count(f) == 0 || x.at(f) != v;
  for (const auto &[f, v] : x) diff += y.count(f) == 0;
  return diff;
}

// The fields of the program itself (name, options, source, NVRTC build...), without those of
// what NVRTC was seen to read (headers, probes, variables, directories).
KeyFields program_fields(const KeyFields &all) {
  static const char *const kPrefixes[] = {"file ", "probe ",   "lprobe ", "access(",
                                          "list ", "resolve ", "env "};
  static const char *const kNames[] = {"name", "name_dir", "working_dir", "pwd"};
  KeyFields out;
  for (const auto &field : all) {
    bool observed = false;
    for (const char *prefix : kPrefixes) observed |= field.first.rfind(prefix, 0) == 0;
    for (const char *name : kNames) observed |= field.first == name;
    if (!observed) out.push_back(field);
  }
  return out;
}

KeyFields entry_key_fields(const pcache_entry *entry) {
  size_t n = 0;
  const char *const *names = nullptr, *const *values = nullptr;
  check(pcache_entry_key_fields(entry, &n, &names, &values));
  return to_key_fields(n, names, values);
}

}  // namespace

int cmd_explain(Invocation &in) {
  const Program program(in);
  const ExplainHandle e = explain_program(in.cache, program);
  const char *file = program.file().c_str();
  const std::string uncacheable = pcache_explain_uncacheable(e.get());
  if (!uncacheable.empty()) {
    std::printf("uncacheable: %s is compiled every time and never stored: %s\n", file,
                uncacheable.c_str());
    return 1;
  }
  size_t n = 0;
  const char *const *names = nullptr, *const *values = nullptr;
  check(pcache_explain_key_fields(e.get(), &n, &names, &values));
  const KeyFields current = to_key_fields(n, names, values);
  const std::string key(reinterpret_cast<const char *>(pcache_explain_key(e.get())),
                        PCACHE_KEY_SIZE);
  const std::string key_hex = to_hex(key.data(), key.size());
  const std::string why_not = pcache_explain_why_not(e.get());
  if (why_not.empty() && peek_entry(in.cache, key)) {
    std::printf("hit: %s is cached (key %s)\n", file, key_hex.c_str());
    return 0;
  }
  // An observation (what NVRTC read) that no longer holds says why by itself; the program's own
  // fields are compared with the closest stored entry of the same name.
  const bool observed = why_not.empty();
  if (!observed) std::printf("miss: %s is not cached: %s\n", file, why_not.c_str());
  const KeyFields want = observed ? current : program_fields(current);
  KeyFields best;
  size_t best_diff = SIZE_MAX, same_name = 0, total = 0;
  uint32_t best_nvrtc = 0;
  for (const ListedEntry &listed : list_entries(in.cache)) {
    ++total;
    const EntryHandle entry = peek_entry(in.cache, listed.key);
    if (!entry || program.file() != pcache_entry_program_name(entry.get())) continue;
    ++same_name;
    KeyFields have =
        observed ? entry_key_fields(entry.get()) : program_fields(entry_key_fields(entry.get()));
    if (const size_t diff = count_differences(have, want); diff < best_diff) {
      best_diff = diff;
      best = std::move(have);
      best_nvrtc = pcache_entry_nvrtc_version(entry.get());
    }
  }
  if (observed) std::printf("miss: %s is not cached (key %s)\n", file, key_hex.c_str());
  if (same_name == 0) {
    std::printf("no stored entry has the program name '%s' (%zu entries of other programs)\n", file,
                total);
    return 1;
  }
  if (!observed && count_differences(best, want) == 0) return 1;  // only what NVRTC read differs
  std::printf("closest of %zu stored entries named '%s' differs in:\n", same_name, file);
  print_key_differences(best, want, best_nvrtc);
  return 1;
}

}  // namespace progcache::cli
