#include "program.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_set>

#include "core/cache.hpp"
#include "real_nvrtc.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"

namespace progcache::dropin {
namespace {

Registry<DropinProgram> g_programs;

nvrtcProgram handle_of(DropinProgram *p) {
  return reinterpret_cast<nvrtcProgram>(p);
}

}  // namespace

namespace {

struct OutputGetters {
  nvrtcResult (*size)(nvrtcProgram, size_t *);
  nvrtcResult (*data)(nvrtcProgram, char *);
};

OutputGetters getters_of(const NvrtcApi &real, OutputKind kind) {
  switch (kind) {
    case OutputKind::ptx:
      return {real.ptx_size, real.ptx};
    case OutputKind::cubin:
      return {real.cubin_size, real.cubin};
    case OutputKind::ltoir:
      return {real.ltoir_size, real.ltoir};
    case OutputKind::optixir:
      break;
  }
  return {require(real.optixir_size, "nvrtcGetOptiXIRSize"),
          require(real.optixir, "nvrtcGetOptiXIR")};
}

std::string real_log(const NvrtcApi &real, nvrtcProgram program) {
  size_t size = 0;
  if (real.log_size(program, &size) != NVRTC_SUCCESS || size == 0) return "";
  std::string log(size, '\0');
  if (real.log(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // the terminating NUL
  return log;
}

}  // namespace

nvrtcResult DropinProgram::create(nvrtcProgram *out, const char *source, const char *name,
                                  int num_headers, const char *const *headers,
                                  const char *const *include_names) {
  if (!out) return NVRTC_ERROR_INVALID_PROGRAM;
  bool modelled = source && num_headers >= 0 && (num_headers == 0 || (headers && include_names));
  for (int i = 0; modelled && i < num_headers; ++i) modelled = headers[i] && include_names[i];
  if (!modelled) {
    // What NVRTC makes of this is NVRTC's to say.
    nvrtcProgram real = nullptr;
    const nvrtcResult rc =
        real_nvrtc().create(&real, source, name, num_headers, headers, include_names);
    if (rc != NVRTC_SUCCESS) return rc;
    return adopt_real(out, real);
  }
  std::unique_ptr<DropinProgram> p(new DropinProgram());
  p->source_ = source;
  p->has_name_ = name != nullptr;
  if (name) p->name_ = name;
  for (int i = 0; i < num_headers; ++i) p->headers_.emplace_back(include_names[i], headers[i]);
  g_programs.add(p.get());
  *out = handle_of(p.release());
  return NVRTC_SUCCESS;
}

nvrtcResult DropinProgram::adopt_real(nvrtcProgram *out, nvrtcProgram real) {
  std::unique_ptr<DropinProgram> p(new DropinProgram());
  p->real_ = real;
  p->forward_only_ = true;
  p->state_ = State::real;
  g_programs.add(p.get());
  *out = handle_of(p.release());
  return NVRTC_SUCCESS;
}

DropinProgram *DropinProgram::find(nvrtcProgram handle) {
  return g_programs.find(handle);
}

nvrtcResult DropinProgram::destroy(nvrtcProgram *handle) {
  if (!handle) return NVRTC_ERROR_INVALID_PROGRAM;
  auto *p = reinterpret_cast<DropinProgram *>(*handle);
  if (!g_programs.remove(p)) return NVRTC_ERROR_INVALID_PROGRAM;
  delete p;
  *handle = nullptr;
  return NVRTC_SUCCESS;
}

DropinProgram::~DropinProgram() {
  drop_real();
}

void DropinProgram::drop_real() {
  if (real_) (void)real_nvrtc().destroy(&real_);
  real_ = nullptr;
}

nvrtcResult DropinProgram::ensure_real() {
  if (real_) return NVRTC_SUCCESS;
  std::vector<const char *> names, sources;
  for (const auto &[n, s] : headers_) {
    names.push_back(n.c_str());
    sources.push_back(s.c_str());
  }
  const NvrtcApi &real = real_nvrtc();
  nvrtcResult rc = real.create(&real_, source_.c_str(), has_name_ ? name_.c_str() : nullptr,
                               int(names.size()), sources.data(), names.data());
  if (rc != NVRTC_SUCCESS) {
    real_ = nullptr;
    return rc;
  }
  // The calls the caller made, in order: the real program ends in the state NVRTC's would be in
  // (a name expression added after a refused compile, say).
  for (const Call &call : calls_) {
    if (call.compile) {
      std::vector<const char *> opts;
      for (const std::string &o : call.options) opts.push_back(o.c_str());
      (void)real.compile(real_, int(opts.size()), opts.data());
    } else if ((rc = real.add_name_expression(real_, call.expression.c_str())) != NVRTC_SUCCESS &&
               !compiled_) {
      return rc;
    }
  }
  return NVRTC_SUCCESS;
}

nvrtcResult DropinProgram::add_name_expression(const char *expression) {
  std::lock_guard lock(mutex_);
  if (forward_only_) return real_nvrtc().add_name_expression(real_, expression);
  if (!expression) return NVRTC_ERROR_INVALID_INPUT;
  // After a compile NVRTC's answer depends on how that compile ended: a success refuses more
  // name expressions (answered here); anything else is the real program's to answer.
  if (compiled_ && state_ == State::answered && !failed_)
    return NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION;
  nvrtcResult rc = NVRTC_SUCCESS;
  if (compiled_ || real_) {
    if ((rc = ensure_real()) != NVRTC_SUCCESS) return rc;
    rc = real_nvrtc().add_name_expression(real_, expression);
  }
  calls_.push_back({false, expression, {}});
  if (!compiled_) name_expressions_.emplace_back(expression);
  return rc;
}

ProgramDesc DropinProgram::describe(const std::vector<std::string> &options) const {
  ProgramDesc d;
  d.name = has_name_ ? std::string_view(name_) : std::string_view("default_program");
  d.code_type = CodeType::cxx;
  d.target = Target::nvrtc_outputs;
  d.source = ByteView(source_);
  for (const std::string &o : options) d.options.emplace_back(o);
  for (const auto &[n, s] : headers_) d.headers.emplace_back(n, s);
  for (const std::string &e : name_expressions_) d.name_expressions.emplace_back(e);
  return d;
}

namespace {

// Every getter's answer after a compile, as a hit replays them.
CompileOutputs collect_outputs(const NvrtcApi &real, nvrtcProgram program) {
  CompileOutputs outputs;
  for (int k = 0; k < kOutputKinds; ++k) {
    const OutputGetters get = getters_of(real, OutputKind(k));
    outputs.slots[k] = collect_slot(get.size, get.data, program);
  }
  return outputs;
}

}  // namespace

NvrtcOutput DropinProgram::run_real(int num_options, const char *const *options) {
  NvrtcOutput out;
  drop_real();  // a fresh program: the recorded name expressions, then this compile
  if ((out.nvrtc_result = ensure_real()) != NVRTC_SUCCESS) return out;
  const NvrtcApi &real = real_nvrtc();
  const auto t0 = std::chrono::steady_clock::now();
  const nvrtcResult rc = real.compile(real_, num_options, options);
  out.compile_us = uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  out.nvrtc_result = rc;
  out.log = real_log(real, real_);
  CompileOutputs outputs = collect_outputs(real, real_);
  if (rc != NVRTC_SUCCESS) {
    const char *lowered = nullptr;
    outputs.lowered_result = real.lowered_name(
        real_, name_expressions_.empty() ? "k" : name_expressions_[0].c_str(), &lowered);
  }
  out.code = encode_outputs(outputs);
  out.ok = rc == NVRTC_SUCCESS;
  if (!out.ok) return out;
  for (const std::string &e : name_expressions_) {
    const char *lowered = nullptr;
    if (real.lowered_name(real_, e.c_str(), &lowered) == NVRTC_SUCCESS && lowered)
      out.lowered_names.emplace_back(e, lowered);
  }
  return out;
}

nvrtcResult DropinProgram::compile_on_real(int num_options, const char *const *options) {
  state_ = State::real;
  failed_ = false;
  nvrtcResult rc = ensure_real();
  if (rc == NVRTC_SUCCESS) rc = real_nvrtc().compile(real_, num_options, options);
  Call call{true, {}, {}};
  for (int i = 0; i < num_options && options; ++i)
    if (options[i]) call.options.emplace_back(options[i]);
  calls_.push_back(std::move(call));
  return rc;
}

nvrtcResult DropinProgram::compile(int num_options, const char *const *options) {
  std::lock_guard lock(mutex_);
  if (forward_only_) return real_nvrtc().compile(real_, num_options, options);
  const bool again = compiled_;
  compiled_ = true;
  bool modelled = num_options >= 0 && (num_options == 0 || options);
  for (int i = 0; modelled && i < num_options; ++i) modelled = options[i] != nullptr;
  // A program compiled again carries its earlier compiles in NVRTC's state: the real program,
  // replayed, answers (exactly as NVRTC would; a second compile of one program is rare).
  if (!modelled || again) return compile_on_real(num_options, options);
  const std::vector<std::string> opts(options, options + num_options);
  bool ran_here = false;
  CompileOptions co;
  co.runner = [&](const ProgramDesc &) {
    ran_here = true;
    return run_real(num_options, options);
  };
  std::shared_ptr<CompileResult> r;
  try {
    r = compile_through_cache(dropin_cache(), describe(opts), co);
  } catch (const Error &) {
    // Options the key refuses, no NVRTC to identify, a store that failed: NVRTC answers, nothing
    // is cached.
    drop_real();
    return compile_on_real(num_options, options);
  }
  calls_.push_back({true, {}, opts});
  if (r->status != Status::ok && ran_here) {
    state_ = State::real;  // the real program that refused it answers the getters
    return nvrtcResult(r->nvrtc_result);
  }
  auto decoded = decode_outputs(r->code);
  if (!decoded) {  // another thread's compile that was not stored, or a foreign payload
    calls_.pop_back();
    drop_real();
    return compile_on_real(num_options, options);
  }
  outputs_ = std::move(*decoded);
  log_ = r->meta.log;
  lowered_ = r->meta.lowered_names;
  state_ = State::answered;
  failed_ = r->status != Status::ok;
  refusal_ = nvrtcResult(r->nvrtc_result);
  if (!failed_) drop_real();  // its outputs are all in outputs_
  return failed_ ? refusal_ : NVRTC_SUCCESS;
}

nvrtcResult DropinProgram::output_size(OutputKind kind, size_t *size) {
  std::lock_guard lock(mutex_);
  if (state_ == State::answered) {
    if (!size) return NVRTC_ERROR_INVALID_INPUT;
    const OutputSlot &slot = outputs_[kind];
    if (slot.size_result == NVRTC_SUCCESS && slot.size_written) *size = slot.bytes.size();
    return nvrtcResult(slot.size_result);
  }
  if (const nvrtcResult rc = ensure_real(); rc != NVRTC_SUCCESS) return rc;
  return getters_of(real_nvrtc(), kind).size(real_, size);
}

nvrtcResult DropinProgram::output(OutputKind kind, char *buffer) {
  std::lock_guard lock(mutex_);
  if (state_ == State::answered) {
    if (!buffer) return NVRTC_ERROR_INVALID_INPUT;
    const OutputSlot &slot = outputs_[kind];
    if (slot.data_result == NVRTC_SUCCESS && !slot.bytes.empty())
      std::memcpy(buffer, slot.bytes.data(), slot.bytes.size());
    return nvrtcResult(slot.data_result);
  }
  if (const nvrtcResult rc = ensure_real(); rc != NVRTC_SUCCESS) return rc;
  return getters_of(real_nvrtc(), kind).data(real_, buffer);
}

nvrtcResult DropinProgram::log_size(size_t *size) {
  std::lock_guard lock(mutex_);
  if (state_ == State::answered) {
    if (!size) return NVRTC_ERROR_INVALID_INPUT;
    *size = log_.size() + 1;
    return NVRTC_SUCCESS;
  }
  if (const nvrtcResult rc = ensure_real(); rc != NVRTC_SUCCESS) return rc;
  return real_nvrtc().log_size(real_, size);
}

nvrtcResult DropinProgram::log(char *buffer) {
  std::lock_guard lock(mutex_);
  if (state_ == State::answered) {
    if (!buffer) return NVRTC_ERROR_INVALID_INPUT;
    std::memcpy(buffer, log_.c_str(), log_.size() + 1);
    return NVRTC_SUCCESS;
  }
  if (const nvrtcResult rc = ensure_real(); rc != NVRTC_SUCCESS) return rc;
  return real_nvrtc().log(real_, buffer);
}

nvrtcResult DropinProgram::lowered_name(const char *expression, const char **lowered) {
  std::lock_guard lock(mutex_);
  if (state_ == State::answered && failed_) {
    if (!expression || !lowered) return NVRTC_ERROR_INVALID_INPUT;
    return nvrtcResult(outputs_.lowered_result);  // a refused compile lowered no name
  }
  if (state_ == State::answered) {
    if (!expression || !lowered) return NVRTC_ERROR_INVALID_INPUT;
    for (const auto &[e, symbol] : lowered_)
      if (e == expression) {
        *lowered = symbol.c_str();
        return NVRTC_SUCCESS;
      }
    return NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
  }
  if (const nvrtcResult rc = ensure_real(); rc != NVRTC_SUCCESS) return rc;
  return real_nvrtc().lowered_name(real_, expression, lowered);
}

nvrtcResult DropinProgram::set_flow_callback(int (*callback)(void *, void *), void *payload) {
  std::lock_guard lock(mutex_);
  // NVRTC calls the callback during the compile: only a real compile can, so this program is
  // the real one's from now on.
  if (const nvrtcResult rc = ensure_real(); rc != NVRTC_SUCCESS) return rc;
  forward_only_ = true;
  state_ = State::real;
  return require(real_nvrtc().set_flow_callback, "nvrtcSetFlowCallback")(real_, callback, payload);
}

nvrtcResult DropinProgram::pch_create_status() {
  std::lock_guard lock(mutex_);
  // A compile that creates a PCH is never cached: an answered one attempted none.
  if (state_ == State::answered && !failed_) return NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED;
  if (const nvrtcResult rc = ensure_real(); rc != NVRTC_SUCCESS) return rc;
  return require(real_nvrtc().pch_create_status, "nvrtcGetPCHCreateStatus")(real_);
}

nvrtcResult DropinProgram::pch_heap_size_required(size_t *size) {
  std::lock_guard lock(mutex_);
  if (state_ == State::answered && !failed_) {  // as NVRTC answers after a compile that made no PCH
    if (!size) return NVRTC_ERROR_INVALID_INPUT;
    *size = 0;
    return NVRTC_SUCCESS;
  }
  if (const nvrtcResult rc = ensure_real(); rc != NVRTC_SUCCESS) return rc;
  return require(real_nvrtc().pch_heap_size_required, "nvrtcGetPCHHeapSizeRequired")(real_, size);
}

}  // namespace progcache::dropin
