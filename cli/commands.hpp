// The commands of the progcache tool, one source file each (cli/cmd_NAME.cpp); the table that
// names them, their options and their help is cli/commands.cpp.
#pragma once

#include "cli.hpp"

namespace progcache::cli {

int cmd_compile(Invocation &in);
int cmd_link(Invocation &in);
int cmd_config(Invocation &in);
int cmd_deps(Invocation &in);
int cmd_explain(Invocation &in);
int cmd_stats(Invocation &in);
int cmd_ls(Invocation &in);
int cmd_get(Invocation &in);
int cmd_put(Invocation &in);
int cmd_rm(Invocation &in);
int cmd_clear(Invocation &in);
int cmd_prune(Invocation &in);
int cmd_verify(Invocation &in);
int cmd_evict(Invocation &in);
int cmd_export(Invocation &in);
int cmd_import(Invocation &in);
int cmd_run(Invocation &in);
int cmd_version(Invocation &in);
int cmd_help(Invocation &in);

}  // namespace progcache::cli
