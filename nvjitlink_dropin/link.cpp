#include "link.hpp"

#include <chrono>
#include <memory>

#include "real_nvjitlink.hpp"
#include "util/error.hpp"
#include "util/fsutil.hpp"

namespace progcache::dropin {
namespace {

constexpr const char *kLibrary = "nvJitLink";
// "PNL1": progcache nvJitLink outputs, version 1.
constexpr std::string_view kMagic = "PNL1";
// A file larger than this is added by the real library only (the drop-in keeps inputs in memory).
constexpr size_t kMaxFileInput = size_t(1) << 30;

Registry<DropinLink> g_links;

Cache *cache() {
  return dropin_cache(kLibrary);
}

nvJitLinkHandle handle_of(DropinLink *p) {
  return reinterpret_cast<nvJitLinkHandle>(p);
}

// LinkInputKind of an nvJitLinkInputType (the raw type is in the input's key name as well).
LinkInputKind kind_of(nvJitLinkInputType type) {
  const int t = int(type);
  return t >= NVJITLINK_INPUT_CUBIN && t <= NVJITLINK_INPUT_LIBRARY ? LinkInputKind(t - 1)
                                                                    : LinkInputKind::cubin;
}

// An input's bytes as keys and memos see them: their digest (its collisions are BLAKE2b's), so
// that each input is hashed once, however many calls and keys name it.
std::string_view digest_text(const DropinLink::Input &in) {
  return {reinterpret_cast<const char *>(in.data.digest.data()), in.data.digest.size()};
}

std::string log_text(const OutputSlot &slot) {
  std::string text = slot.bytes;
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

}  // namespace

std::string encode_link_outputs(const OutputSlot (&outputs)[kLinkOutputs]) {
  return encode_slots(kMagic, outputs, kLinkOutputs);
}

bool decode_link_outputs(ByteView payload, OutputSlot (&outputs)[kLinkOutputs]) {
  return decode_slots(payload.str(), kMagic, outputs, kLinkOutputs);
}

nvJitLinkResult DropinLink::create(nvJitLinkHandle *out, uint32_t num_options,
                                   const char **options) {
  bool modelled = out && (num_options == 0 || options);
  for (uint32_t i = 0; modelled && i < num_options; ++i) modelled = options[i] != nullptr;
  std::unique_ptr<DropinLink> p;
  if (!modelled) {  // what nvJitLink makes of NULLs is nvJitLink's to say; the link is its own
    nvJitLinkHandle handle = nullptr;
    const nvJitLinkResult rc = real_nvjitlink().create(&handle, num_options, options);
    if (rc != NVJITLINK_SUCCESS || !out) return rc;
    p.reset(new DropinLink({}, AcceptedCalls("", "")));
    p->real_ = handle;
    p->forward_only_ = true;
    p->state_ = State::real;
  } else {
    CallText call;
    call.add("create");
    std::vector<std::string> opts(options, options + num_options);
    for (const std::string &o : opts) call.add(o);
    p.reset(new DropinLink(std::move(opts), AcceptedCalls(real_nvjitlink_build(), call.text())));
    if (!p->accepted_.known(cache()).has_value()) {  // options this build has not been seen to take
      const nvJitLinkResult rc = real_nvjitlink().create(&p->real_, num_options, options);
      if (rc != NVJITLINK_SUCCESS) {
        p->real_ = nullptr;
        return rc;
      }
      p->state_ = State::real;
      p->accepted_.remember(cache());
    }
  }
  g_links.add(p.get());
  *out = handle_of(p.release());
  return NVJITLINK_SUCCESS;
}

DropinLink *DropinLink::find(nvJitLinkHandle handle) {
  return g_links.find(handle);
}

nvJitLinkResult DropinLink::destroy(nvJitLinkHandle *handle) {
  auto *p = reinterpret_cast<DropinLink *>(*handle);
  if (!g_links.remove(p)) return NVJITLINK_ERROR_INVALID_INPUT;
  delete p;
  *handle = nullptr;
  return NVJITLINK_SUCCESS;
}

DropinLink::~DropinLink() {
  drop_real();
}

void DropinLink::drop_real() {
  if (real_) (void)real_nvjitlink().destroy(&real_);
  real_ = nullptr;
}

nvJitLinkResult DropinLink::ensure_real() {
  if (real_) return NVJITLINK_SUCCESS;
  const NvJitLinkApi &real = real_nvjitlink();
  std::vector<const char *> opts;
  for (const std::string &o : options_) opts.push_back(o.c_str());
  nvJitLinkResult rc = real.create(&real_, uint32_t(opts.size()), opts.data());
  if (rc != NVJITLINK_SUCCESS) {
    real_ = nullptr;
    return rc;
  }
  // The calls the caller made, in order; a file is added again from its path, as it was.
  for (const Input &in : inputs_) {
    rc = in.from_file ? real.add_file(real_, in.type, in.name.c_str())
                      : real.add_data(real_, in.type, in.data.bytes->data(), in.data.bytes->size(),
                                      in.has_name ? in.name.c_str() : nullptr);
    if (rc != NVJITLINK_SUCCESS) return rc;
  }
  if (state_ == State::answered) {  // the real link catches up with the Complete answered
    (void)real.complete(real_);
    state_ = State::real;
  }
  return NVJITLINK_SUCCESS;
}

template <class OnReal>
nvJitLinkResult DropinLink::forward(OnReal &&on_real) {
  const nvJitLinkResult rc = ensure_real();
  if (rc != NVJITLINK_SUCCESS) return rc;
  forward_only_ = true;
  state_ = State::real;
  return on_real();
}

template <class OnReal>
nvJitLinkResult DropinLink::add(Input input, const CallText &call, OnReal &&on_real) {
  std::lock_guard lock(mutex_);
  // An input after Complete is the real link's to answer.
  if (forward_only_ || completed_) return forward(on_real);
  nvJitLinkResult rc = NVJITLINK_SUCCESS;
  AcceptedCalls next = accepted_;
  next.add(call.text());
  if (!real_ && next.known(cache()).has_value()) {
    inputs_.push_back(std::move(input));
    accepted_ = std::move(next);
    return NVJITLINK_SUCCESS;
  }
  if ((rc = ensure_real()) != NVJITLINK_SUCCESS) return rc;
  state_ = State::real;
  rc = on_real();
  inputs_.push_back(std::move(input));
  accepted_ = next;
  if (rc == NVJITLINK_SUCCESS)
    next.remember(cache());
  else
    forward_only_ = true;  // what a refused input leaves behind is the real link's
  return rc;
}

nvJitLinkResult DropinLink::add_data(nvJitLinkInputType type, const void *data, size_t size,
                                     const char *name) {
  auto on_real = [&] { return real_nvjitlink().add_data(real_, type, data, size, name); };
  if (!data) {  // the real library's answer, whatever it is
    std::lock_guard lock(mutex_);
    return forward(on_real);
  }
  Input in;
  in.type = type;
  in.has_name = name != nullptr;
  if (name) in.name = name;
  in.data = intern_input(data, size);
  in.key_name = std::to_string(int(type)) + (name ? " data " + in.name : " data, no name");
  CallText call;
  call.add("data").add(uint64_t(type)).add(uint64_t(in.has_name)).add(in.name).add(digest_text(in));
  return add(std::move(in), call, on_real);
}

nvJitLinkResult DropinLink::add_file(nvJitLinkInputType type, const char *file) {
  Input in;
  in.type = type;
  in.from_file = true;
  std::string contents;
  const bool readable = file && read_whole_file(file, &contents, kMaxFileInput);
  auto on_real = [&] { return real_nvjitlink().add_file(real_, type, file); };
  if (!readable) {  // no file to key: the real library answers (and says why)
    std::lock_guard lock(mutex_);
    return forward(on_real);
  }
  in.data = intern_input(contents.data(), contents.size());
  in.has_name = true;
  in.name = file;
  in.key_name = std::to_string(int(type)) + " file " + in.name;
  CallText call;
  call.add("file").add(uint64_t(type)).add(in.name).add(digest_text(in));
  return add(std::move(in), call, on_real);
}

ProgramDesc DropinLink::describe() const {
  static const char kNoSource[1] = "";
  ProgramDesc d;
  d.name = "nvJitLink";
  d.code_type = CodeType::link;
  d.target = Target::nvrtc_outputs;
  d.source = ByteView(kNoSource, 0);
  for (const std::string &o : options_) d.options.emplace_back(o);
  for (const Input &in : inputs_)
    d.link_inputs.push_back({kind_of(in.type), in.key_name, ByteView(digest_text(in))});
  return d;
}

NvrtcOutput DropinLink::run_real() {
  NvrtcOutput out;
  if ((out.nvrtc_result = ensure_real()) != NVJITLINK_SUCCESS) return out;
  state_ = State::real;
  const NvJitLinkApi &real = real_nvjitlink();
  const auto t0 = std::chrono::steady_clock::now();
  const nvJitLinkResult rc = real.complete(real_);
  out.compile_us = uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  out.nvrtc_result = rc;
  out.ok = rc == NVJITLINK_SUCCESS;
  OutputSlot slots[kLinkOutputs] = {
      collect_slot(real.cubin_size, real.cubin, real_),
      collect_slot(real.ptx_size, real.ptx, real_),
      collect_slot(real.error_log_size, real.error_log, real_),
      collect_slot(real.info_log_size, real.info_log, real_),
  };
  out.log =
      log_text(slots[int(LinkOutput::error_log)]) + log_text(slots[int(LinkOutput::info_log)]);
  out.code = encode_link_outputs(slots);
  unsigned major = 0, minor = 0;
  if (real.version(&major, &minor) == NVJITLINK_SUCCESS)
    out.library_version = major * 1000 + minor * 10;
  return out;
}

nvJitLinkResult DropinLink::complete() {
  std::lock_guard lock(mutex_);
  auto on_real = [&] { return real_nvjitlink().complete(real_); };
  const bool again = completed_;
  completed_ = true;
  if (forward_only_ || again) return forward(on_real);
  bool ran_here = false;
  nvJitLinkResult ran = NVJITLINK_SUCCESS;
  CompileOptions co;
  co.runner = [&](const ProgramDesc &) {
    ran_here = true;
    NvrtcOutput out = run_real();
    ran = nvJitLinkResult(out.nvrtc_result);
    return out;
  };
  std::shared_ptr<CompileResult> r;
  try {
    r = compile_through_cache(cache(), describe(), co);
  } catch (const Error &) {
    // No nvJitLink to identify, a store that failed: nvJitLink answers, nothing is cached.
    return ran_here ? ran : forward(on_real);
  }
  if (ran_here && r->status != Status::ok) return ran;  // the real link that refused it answers
  if (r->status != Status::ok || !decode_link_outputs(r->code, outputs_))
    return ran_here ? ran : forward(on_real);  // another thread's refusal, a foreign payload
  state_ = State::answered;
  drop_real();  // every answer is in outputs_
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult DropinLink::output_size(LinkOutput which, size_t *size) {
  std::lock_guard lock(mutex_);
  if (state_ == State::answered && size) {
    const OutputSlot &slot = outputs_[int(which)];
    if (slot.size_result == NVJITLINK_SUCCESS && slot.size_written) *size = slot.bytes.size();
    return nvJitLinkResult(slot.size_result);
  }
  if (const nvJitLinkResult rc = ensure_real(); rc != NVJITLINK_SUCCESS) return rc;
  const NvJitLinkApi &real = real_nvjitlink();
  switch (which) {
    case LinkOutput::cubin:
      return real.cubin_size(real_, size);
    case LinkOutput::ptx:
      return real.ptx_size(real_, size);
    case LinkOutput::error_log:
      return real.error_log_size(real_, size);
    case LinkOutput::info_log:
      break;
  }
  return real.info_log_size(real_, size);
}

nvJitLinkResult DropinLink::output(LinkOutput which, void *buffer) {
  std::lock_guard lock(mutex_);
  if (state_ == State::answered && buffer) {
    const OutputSlot &slot = outputs_[int(which)];
    if (slot.data_result == NVJITLINK_SUCCESS && !slot.bytes.empty())
      std::memcpy(buffer, slot.bytes.data(), slot.bytes.size());
    return nvJitLinkResult(slot.data_result);
  }
  if (const nvJitLinkResult rc = ensure_real(); rc != NVJITLINK_SUCCESS) return rc;
  const NvJitLinkApi &real = real_nvjitlink();
  char *text = static_cast<char *>(buffer);
  switch (which) {
    case LinkOutput::cubin:
      return real.cubin(real_, buffer);
    case LinkOutput::ptx:
      return real.ptx(real_, text);
    case LinkOutput::error_log:
      return real.error_log(real_, text);
    case LinkOutput::info_log:
      break;
  }
  return real.info_log(real_, text);
}

}  // namespace progcache::dropin
