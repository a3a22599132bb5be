#include "program.hpp"

#include <chrono>
#include <cstring>
#include <memory>

#include "real_nvvm.hpp"
#include "util/error.hpp"

namespace progcache::dropin {
namespace {

constexpr const char *kLibrary = "libNVVM";
// "PNV1": progcache libNVVM outputs, version 1.
constexpr std::string_view kMagic = "PNV1";

Registry<DropinNvvm> g_programs;

Cache *cache() {
  return dropin_cache(kLibrary);
}

std::vector<const char *> pointers(const std::vector<std::string> &strings) {
  std::vector<const char *> out;
  for (const std::string &s : strings) out.push_back(s.c_str());
  return out;
}

// Whether an option list is one the drop-in can record (no NULLs).
bool modelled(int num_options, const char **options) {
  bool ok = num_options >= 0 && (num_options == 0 || options);
  for (int i = 0; ok && i < num_options; ++i) ok = options[i] != nullptr;
  return ok;
}

}  // namespace

std::string encode_nvvm_outputs(const OutputSlot (&outputs)[kNvvmOutputs]) {
  return encode_slots(kMagic, outputs, kNvvmOutputs);
}

bool decode_nvvm_outputs(ByteView payload, OutputSlot (&outputs)[kNvvmOutputs]) {
  return decode_slots(payload.str(), kMagic, outputs, kNvvmOutputs);
}

nvvmResult DropinNvvm::create(nvvmProgram *out) {
  if (!out) return real_nvvm().create(out);  // the real library's answer
  // nvvmCreateProgram refuses nothing but a NULL: a program is recorded without the library.
  std::unique_ptr<DropinNvvm> p(new DropinNvvm(AcceptedCalls(real_nvvm_build(), "create")));
  g_programs.add(p.get());
  *out = reinterpret_cast<nvvmProgram>(p.release());
  return NVVM_SUCCESS;
}

DropinNvvm *DropinNvvm::find(nvvmProgram handle) {
  return g_programs.find(handle);
}

nvvmResult DropinNvvm::destroy(nvvmProgram *handle) {
  auto *p = reinterpret_cast<DropinNvvm *>(*handle);
  if (!g_programs.remove(p)) return NVVM_ERROR_INVALID_PROGRAM;
  delete p;
  *handle = nullptr;
  return NVVM_SUCCESS;
}

DropinNvvm::~DropinNvvm() {
  drop_real();
}

void DropinNvvm::drop_real() {
  if (real_) (void)real_nvvm().destroy(&real_);
  real_ = nullptr;
}

nvvmResult DropinNvvm::ensure_real() {
  if (real_) return NVVM_SUCCESS;
  const NvvmApi &real = real_nvvm();
  nvvmResult rc = real.create(&real_);
  if (rc != NVVM_SUCCESS) {
    real_ = nullptr;
    return rc;
  }
  for (const Call &c : calls_) {  // the calls the caller made, in order
    const char *name = c.has_name ? c.name.c_str() : nullptr;
    if (c.op == Op::verify) {
      std::vector<const char *> opts = pointers(c.options);
      rc = real.verify(real_, int(opts.size()), opts.data());
    } else {
      rc = (c.op == Op::lazy_add ? real.lazy_add_module : real.add_module)(
          real_, c.bytes.bytes->data(), c.bytes.bytes->size(), name);
    }
    if (rc != NVVM_SUCCESS) return rc;
  }
  if (state_ == State::answered) {  // the real program catches up with the compile answered
    std::vector<const char *> opts = pointers(compile_options_);
    (void)real.compile(real_, int(opts.size()), opts.data());
    state_ = State::real;
  }
  return NVVM_SUCCESS;
}

template <class OnReal>
nvvmResult DropinNvvm::forward(OnReal &&on_real) {
  const nvvmResult rc = ensure_real();
  if (rc != NVVM_SUCCESS) return rc;
  forward_only_ = true;
  state_ = State::real;
  return on_real();
}

template <class OnReal>
nvvmResult DropinNvvm::record(Call call, OnReal &&on_real) {
  if (forward_only_ || compiled_) return forward(on_real);
  AcceptedCalls next = accepted_;
  next.add(CallText()
               .add(uint64_t(call.op))
               .add(uint64_t(call.has_name))
               .add(call.name)
               .add(call.digest())
               .text());
  log_after_call_.reset();
  if (!real_)
    if (const auto answers = next.known(cache())) {
      calls_.push_back(std::move(call));
      accepted_ = std::move(next);
      ByteReader r(*answers);
      OutputSlot log;
      read_slot(r, &log);
      if (r.done()) log_after_call_ = std::move(log);
      return NVVM_SUCCESS;
    }
  nvvmResult rc = ensure_real();
  if (rc != NVVM_SUCCESS) return rc;
  state_ = State::real;
  rc = on_real();
  calls_.push_back(std::move(call));
  accepted_ = next;
  if (rc != NVVM_SUCCESS) {
    forward_only_ = true;  // what a refused call leaves behind is the real program's
    return rc;
  }
  const NvvmApi &real = real_nvvm();
  ByteWriter log;
  write_slot(log, collect_slot(real.log_size, real.log, real_));
  next.remember(cache(), log.take());
  return rc;
}

nvvmResult DropinNvvm::add_module(bool lazy, const char *buffer, size_t size, const char *name) {
  std::lock_guard lock(mutex_);
  const NvvmApi *real = nullptr;
  auto on_real = [&] {
    real = &real_nvvm();
    return (lazy ? real->lazy_add_module : real->add_module)(real_, buffer, size, name);
  };
  if (!buffer) return forward(on_real);
  Call c;
  c.op = lazy ? Op::lazy_add : Op::add;
  c.has_name = name != nullptr;
  if (name) c.name = name;
  c.bytes = intern_input(buffer, size);
  c.key_name = std::string(lazy ? "lazy " : "module ") + (name ? c.name : "(no name)");
  return record(std::move(c), on_real);
}

nvvmResult DropinNvvm::verify(int num_options, const char **options) {
  std::lock_guard lock(mutex_);
  auto on_real = [&] { return real_nvvm().verify(real_, num_options, options); };
  if (!modelled(num_options, options)) return forward(on_real);
  Call c;
  c.op = Op::verify;
  c.options.assign(options, options + num_options);
  CallText text;
  for (const std::string &o : c.options) text.add(o);
  c.bytes = intern_input(text.text().data(), text.text().size());
  c.key_name = "verify";
  return record(std::move(c), on_real);
}

ProgramDesc DropinNvvm::describe(const std::vector<std::string> &options) const {
  static const char kNoSource[1] = "";
  ProgramDesc d;
  d.name = "libNVVM";
  d.code_type = CodeType::nvvm;
  d.target = Target::nvrtc_outputs;
  d.source = ByteView(kNoSource, 0);
  for (const std::string &o : options) d.options.emplace_back(o);
  // Every call in order, as libNVVM's modules in order are keyed (core/key.cpp).
  for (const Call &c : calls_) d.headers.emplace_back(c.key_name, c.digest());
  return d;
}

NvrtcOutput DropinNvvm::run_real(int num_options, const char **options) {
  NvrtcOutput out;
  if ((out.nvrtc_result = ensure_real()) != NVVM_SUCCESS) return out;
  state_ = State::real;
  const NvvmApi &real = real_nvvm();
  const auto t0 = std::chrono::steady_clock::now();
  const nvvmResult rc = real.compile(real_, num_options, options);
  out.compile_us = uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  out.nvrtc_result = rc;
  out.ok = rc == NVVM_SUCCESS;
  OutputSlot slots[kNvvmOutputs] = {collect_slot(real.result_size, real.result, real_),
                                    collect_slot(real.log_size, real.log, real_)};
  out.log = slots[int(NvvmOutput::log)].bytes;
  while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  out.code = encode_nvvm_outputs(slots);
  int major = 0, minor = 0;
  if (real.version(&major, &minor) == NVVM_SUCCESS)
    out.library_version = uint32_t(major * 1000 + minor * 10);
  return out;
}

nvvmResult DropinNvvm::compile(int num_options, const char **options) {
  std::lock_guard lock(mutex_);
  auto on_real = [&] { return real_nvvm().compile(real_, num_options, options); };
  const bool again = compiled_;
  compiled_ = true;
  log_after_call_.reset();
  if (forward_only_ || again || !modelled(num_options, options)) return forward(on_real);
  const std::vector<std::string> opts(options, options + num_options);
  bool ran_here = false;
  nvvmResult ran = NVVM_SUCCESS;
  CompileOptions co;
  co.runner = [&](const ProgramDesc &) {
    ran_here = true;
    NvrtcOutput out = run_real(num_options, options);
    ran = nvvmResult(out.nvrtc_result);
    return out;
  };
  std::shared_ptr<CompileResult> r;
  try {
    r = compile_through_cache(cache(), describe(opts), co);
  } catch (const Error &) {
    // No libNVVM (or libdevice) to identify, a store that failed: libNVVM answers, uncached.
    return ran_here ? ran : forward(on_real);
  }
  if (ran_here && r->status != Status::ok) return ran;  // the real program that refused it answers
  if (r->status != Status::ok || !decode_nvvm_outputs(r->code, outputs_))
    return ran_here ? ran : forward(on_real);  // another thread's refusal, a foreign payload
  compile_options_ = opts;
  state_ = State::answered;
  drop_real();  // every answer is in outputs_
  return NVVM_SUCCESS;
}

// The slot that answers a getter without the real library: the compile's, or the log remembered
// with the last call. Null: the real program answers.
const OutputSlot *DropinNvvm::answering_slot(NvvmOutput which) const {
  if (state_ == State::answered) return &outputs_[int(which)];
  if (state_ == State::recorded && !real_ && which == NvvmOutput::log && log_after_call_)
    return &*log_after_call_;
  return nullptr;
}

nvvmResult DropinNvvm::output_size(NvvmOutput which, size_t *size) {
  std::lock_guard lock(mutex_);
  if (const OutputSlot *answer = answering_slot(which); answer && size) {
    const OutputSlot &slot = *answer;
    if (slot.size_result == NVVM_SUCCESS && slot.size_written) *size = slot.bytes.size();
    return nvvmResult(slot.size_result);
  }
  if (const nvvmResult rc = ensure_real(); rc != NVVM_SUCCESS) return rc;
  const NvvmApi &real = real_nvvm();
  return (which == NvvmOutput::result ? real.result_size : real.log_size)(real_, size);
}

nvvmResult DropinNvvm::output(NvvmOutput which, char *buffer) {
  std::lock_guard lock(mutex_);
  if (const OutputSlot *answer = answering_slot(which); answer && buffer) {
    const OutputSlot &slot = *answer;
    if (slot.data_result == NVVM_SUCCESS && !slot.bytes.empty())
      std::memcpy(buffer, slot.bytes.data(), slot.bytes.size());
    return nvvmResult(slot.data_result);
  }
  if (const nvvmResult rc = ensure_real(); rc != NVVM_SUCCESS) return rc;
  const NvvmApi &real = real_nvvm();
  return (which == NvvmOutput::result ? real.result : real.log)(real_, buffer);
}

}  // namespace progcache::dropin
