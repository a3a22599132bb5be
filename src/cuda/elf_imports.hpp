// Redirects the functions a loaded shared object imports (its GOT slots) to replacements, so
// that what NVRTC asks of the C library can be observed without LD_PRELOAD (docs/keys.md,
// "Observing NVRTC"). Only the patched object's own calls are redirected: the rest of the
// process, progcache included, calls the C library as before.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace progcache {

struct ImportHook {
  const char *name;   // the imported symbol ("open", "__xstat", ...)
  void *replacement;  // what the object calls from now on
  void **original;    // receives what the object called before (once; left alone if set)
};

// The path of every shared object mapped into this process, as the loader names it, in load
// order (the main program, which has no name, is left out).
std::vector<std::string> loaded_object_paths();

// Rewrites every GOT slot of the loaded object at path whose symbol is one of hooks' names (jump
// slots, GOT data slots and absolute data pointers) to its replacement, restoring the pages'
// protection (RELRO) afterwards. *original receives what the object called before: the slot's
// value when the object was bound at load, else the symbol as the global scope resolves it.
// Returns how many slots were rewritten (0 when none names a hook, or all were rewritten
// already); -1 when the object is not loaded, or its dynamic section cannot be read or written
// (an architecture or layout this code does not know). Callers serialise patching.
int patch_imports(const std::string &path, const std::vector<ImportHook> &hooks);

// The names of the functions the loaded object at path imports (undefined symbols its
// relocations refer to); empty when it is not loaded or cannot be read.
std::vector<std::string> imported_functions(const std::string &path);

}  // namespace progcache
