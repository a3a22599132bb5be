// The handle slots and the argument checks every C entry point shares (capi/shim.hpp).
#include "shim.hpp"

#include <string>

#include "progcache/progcache.h"

namespace progcache::shim {
namespace {

std::mutex g_slots_mutex;
pcache *g_free_slots = nullptr;  // reachable, so leak checkers see no leak

}  // namespace

pcache *take_slot() {
  std::lock_guard lock(g_slots_mutex);
  if (pcache *p = g_free_slots) {
    g_free_slots = p->next_free;
    p->next_free = nullptr;
    return p;
  }
  return new pcache();
}

void return_slot(pcache *p) {
  std::vector<pcache *> lent;
  {
    std::lock_guard lazy(p->lazy_mutex);
    lent.swap(p->tier_handles);
    p->display_uri.clear();
    p->scheme.clear();
    p->max_size_source.clear();
  }
  for (pcache *t : lent)
    if (t) {
      t->state.store(kSlotClosed, std::memory_order_release);
      t->tier = nullptr;
      return_slot(t);
    }
  p->cache.reset();
  p->tier = nullptr;
  std::lock_guard lock(g_slots_mutex);
  p->next_free = g_free_slots;
  g_free_slots = p;
}

pcache_status fail(pcache_status status, const std::string &message,
                   const progcache::ErrorDetail &detail) noexcept {
  progcache::ThreadMessages &messages = progcache::thread_messages();
  messages.last_status = status;
  messages.last_detail = detail;
  try {
    messages.last_error = message;
  } catch (...) {
    messages.last_error.clear();  // no memory for the message: the status still says what happened
  }
  return status;
}

Error invalid(const std::string &what) {
  return Error(Status::invalid_arg, what);
}

void refuse_cache(pcache *cache) {
  if (!cache) throw invalid("cache handle is NULL");
  throw invalid("cache handle is closed or invalid");
}

progcache::Cache &need_counters(pcache *cache) {
  progcache::Cache &c = need_cache(cache);
  if (!c.tiers().empty())
    throw Error(Status::unsupported,
                "a tiered cache keeps its shared counters per tier: ask each tier");
  return c;
}

std::vector<std::string_view> string_list(const char *const *list, size_t n, const char *what) {
  std::vector<std::string_view> v;
  read_string_list(list, n, what, &v);
  return v;
}

void read_string_list(const char *const *list, size_t n, const char *what,
                      std::vector<std::string_view> *into) {
  into->clear();
  if (n && !list) throw invalid(std::string(what) + " is NULL with a non-zero count");
  into->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!list[i]) throw invalid(std::string(what) + "[" + std::to_string(i) + "] is NULL");
    into->emplace_back(list[i]);
  }
}

namespace {

// A caller built against a newer header may set fields this library does not know. Ignoring
// one that decides the output would cache and return the wrong binary: refuse instead.
void refuse_unknown_fields(const void *s, size_t known, uint32_t struct_size, const char *what) {
  const auto *bytes = static_cast<const unsigned char *>(s);
  for (size_t i = known; i < struct_size; ++i)
    if (bytes[i])
      throw Error(Status::unsupported, std::string(what) + "->struct_size " +
                                           std::to_string(struct_size) +
                                           " sets fields this library (" + PCACHE_VERSION_STRING +
                                           ") does not know; a compile would ignore them");
}

}  // namespace

progcache::ProgramDesc to_desc(const pcache_program *program) {
  progcache::ProgramDesc d;
  read_program(program, &d);
  return d;
}

void read_program(const pcache_program *program, progcache::ProgramDesc *into) {
  if (!program) throw invalid("program is NULL");
  if (program->struct_size < kProgramV1Size)
    throw invalid("program->struct_size " + std::to_string(program->struct_size) +
                  " is too small (fill it with pcache_program_init)");
  refuse_unknown_fields(program, sizeof(pcache_program), program->struct_size, "program");
  const pcache_program &p = *program;
  progcache::ProgramDesc &d = *into;
  d.name = p.name ? std::string_view(p.name) : progcache::ProgramDesc().name;
  if (p.code_type < PCACHE_CODE_CXX || p.code_type > PCACHE_CODE_NVVM)
    throw invalid("program->code_type " + std::to_string(p.code_type) + " is not a PCACHE_CODE_*");
  d.code_type = static_cast<progcache::CodeType>(p.code_type);
  if (p.target < PCACHE_TARGET_CUBIN || p.target > PCACHE_TARGET_LTOIR)
    throw invalid("program->target " + std::to_string(p.target) + " is not a PCACHE_TARGET_*");
  d.target = static_cast<progcache::Target>(p.target);
  d.nvrtc_version = p.nvrtc_version;
  if (!p.source) throw invalid("program->source is NULL");
  d.source = ByteView(p.source, p.source_size ? p.source_size : std::strlen(p.source));
  read_string_list(p.options, p.num_options, "options", &d.options);
  const auto names = string_list(p.header_names, p.num_headers, "header_names");
  auto sources = string_list(p.header_sources, p.num_headers, "header_sources");
  const bool has_sizes =
      program->struct_size >= offsetof(pcache_program, header_sizes) + sizeof p.header_sizes &&
      p.header_sizes;
  for (size_t i = 0; has_sizes && i < sources.size(); ++i)
    sources[i] = std::string_view(p.header_sources[i], p.header_sizes[i]);
  d.headers.clear();
  d.headers.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) d.headers.emplace_back(names[i], sources[i]);
  read_string_list(p.name_expressions, p.num_name_expressions, "name_expressions",
                   &d.name_expressions);
  if (p.extra_digest_size && !p.extra_digest)
    throw invalid("extra_digest is NULL with a non-zero size");
  d.extra_digest.reset();
  if (p.extra_digest) d.extra_digest = ByteView(p.extra_digest, p.extra_digest_size);
  d.link_inputs.clear();
  d.source_digest.reset();
  d.parsed_options.reset();
}

// Every field of pcache_program is either compared by LastKeyedProgram::match or makes a program
// unkeepable: a field added to the struct must be one or the other before this size is changed.
static_assert(sizeof(pcache_program) == 120, "LastKeyedProgram must learn the new field");

bool LastKeyedProgram::keepable(const pcache_program &p) {
  // A caller's struct of another size has fields this one lacks or the library does not know.
  return p.struct_size == sizeof(pcache_program) && p.num_headers == 0 && !p.extra_digest;
}

namespace {

bool same_strings(const std::vector<std::string> &kept, const char *const *list, size_t n) {
  if (n != kept.size() || (n && !list)) return false;
  for (size_t i = 0; i < n; ++i)
    if (!list[i] || kept[i] != list[i]) return false;
  return true;
}

void copy_strings(const std::vector<std::string_view> &from, std::vector<std::string> *to,
                  std::vector<std::string_view> *views) {
  to->resize(from.size());
  for (size_t i = 0; i < from.size(); ++i) (*to)[i].assign(from[i]);
  views->assign(to->begin(), to->end());
}

}  // namespace

progcache::ProgramDesc *LastKeyedProgram::match(const pcache_program &p) {
  if (!kept_ || !keepable(p) || !p.source || p.code_type != code_type_ || p.target != target_ ||
      p.nvrtc_version != nvrtc_version_ || (p.name != nullptr) != has_name_ ||
      (has_name_ && name_ != p.name) || !same_strings(options_, p.options, p.num_options) ||
      !same_strings(name_expressions_, p.name_expressions, p.num_name_expressions))
    return nullptr;
  desc_.source = ByteView(p.source, p.source_size ? p.source_size : std::strlen(p.source));
  desc_.source_digest.reset();
  return &desc_;
}

void LastKeyedProgram::keep(const pcache_program &p, const progcache::ProgramDesc &desc,
                            std::string_view prefix) {
  kept_ = false;  // until every copy is made: a failed allocation leaves nothing half kept
  if (!keepable(p)) return;
  // Copies as large as the fields the key's kept digests stop at (core/key.cpp) are not kept for
  // the thread's life: the fields' own encoding then costs little beside them.
  size_t bytes = desc.name.size();
  for (std::string_view s : desc.options) bytes += s.size();
  for (std::string_view s : desc.name_expressions) bytes += s.size();
  if (bytes > kMaxKeptBytes) {
    *this = LastKeyedProgram();  // and the storage of earlier copies released
    return;
  }
  has_name_ = p.name != nullptr;
  name_.assign(has_name_ ? p.name : "");
  code_type_ = p.code_type;
  target_ = p.target;
  nvrtc_version_ = p.nvrtc_version;
  prefix_.assign(prefix);
  desc_.name = has_name_ ? std::string_view(name_) : desc.name;  // else the default, a literal
  desc_.code_type = desc.code_type;
  desc_.target = desc.target;
  desc_.nvrtc_version = desc.nvrtc_version;
  copy_strings(desc.options, &options_, &desc_.options);
  copy_strings(desc.name_expressions, &name_expressions_, &desc_.name_expressions);
  desc_.headers.clear();
  desc_.extra_digest.reset();
  desc_.link_inputs.clear();
  desc_.source = ByteView();
  desc_.source_digest.reset();
  desc_.parsed_options = desc.parsed_options;  // the same options: their parse stands
  kept_ = true;
}

progcache::ProgramDesc link_desc(const pcache_link_job *job) {
  if (!job) throw invalid("job is NULL");
  if (job->struct_size < kLinkJobV1Size)
    throw invalid("job->struct_size " + std::to_string(job->struct_size) +
                  " is too small (fill it with pcache_link_job_init)");
  refuse_unknown_fields(job, sizeof(pcache_link_job), job->struct_size, "job");
  progcache::ProgramDesc d;
  d.name = "link";
  d.code_type = progcache::CodeType::link;
  d.source = ByteView("", 0);
  if (job->target != PCACHE_TARGET_CUBIN && job->target != PCACHE_TARGET_PTX)
    throw invalid("job->target " + std::to_string(job->target) +
                  " is not PCACHE_TARGET_CUBIN or PCACHE_TARGET_PTX");
  d.target = static_cast<progcache::Target>(job->target);
  d.options = string_list(job->options, job->num_options, "options");
  if (!job->num_inputs) throw invalid("a link needs inputs (num_inputs is 0)");
  if (!job->inputs) throw invalid("inputs is NULL with a non-zero count");
  // The caller's array: its stride is its struct_size, which every element shares.
  const uint32_t stride = job->inputs[0].struct_size;
  if (stride < kLinkInputV1Size)
    throw invalid("inputs[0].struct_size " + std::to_string(stride) + " is too small");
  const auto *base = reinterpret_cast<const unsigned char *>(job->inputs);
  for (size_t i = 0; i < job->num_inputs; ++i) {
    const auto *in = reinterpret_cast<const pcache_link_input *>(base + i * stride);
    const std::string what = "inputs[" + std::to_string(i) + "]";
    if (in->struct_size != stride)
      throw invalid(what + ".struct_size " + std::to_string(in->struct_size) +
                    " differs from inputs[0]'s");
    refuse_unknown_fields(in, sizeof(pcache_link_input), stride, what.c_str());
    if (in->kind < PCACHE_INPUT_CUBIN || in->kind > PCACHE_INPUT_LIBRARY)
      throw invalid(what + ".kind " + std::to_string(in->kind) + " is not a PCACHE_INPUT_*");
    if (!in->data) throw invalid(what + ".data is NULL");
    progcache::LinkInput li;
    li.kind = static_cast<progcache::LinkInputKind>(in->kind);
    li.name = in->name ? std::string_view(in->name) : std::string_view();
    li.data = ByteView(in->data, in->size);
    d.link_inputs.push_back(li);
  }
  return d;
}

}  // namespace progcache::shim
