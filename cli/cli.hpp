// Pieces of the progcache command shared between its source files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/cache.hpp"

namespace progcache::cli {

// "1.5 MiB": binary units, one decimal.
std::string human_size(uint64_t bytes);

// s as a JSON string literal, quotes included; bytes that are not UTF-8 become U+FFFD
// (cli/json.cpp).
std::string json_string(std::string_view s);

// progcache export FILE / import FILE (cli/transfer.cpp). Return the exit status.
int cmd_export(Cache &cache, const std::string &path);
int cmd_import(Cache &cache, const std::string &path);

}  // namespace progcache::cli
