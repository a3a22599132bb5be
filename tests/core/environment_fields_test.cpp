// nvrtc_environment_fields reads the environment in one pass instead of a getenv per variable: it
// must answer exactly as getenv does for every variable of the list, in every form an environment
// holds it (unset, empty, a value holding '=', an earlier entry shadowing a later one of the same
// name, an entry without '=', a name that only begins like one of the list, no environment).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/key.hpp"

using progcache::KeyField;

namespace {

// The fields as a getenv per variable gives them (the implementation before the one pass).
std::vector<KeyField> by_getenv() {
  std::vector<KeyField> fields;
  for (std::string_view name : progcache::nvrtc_load_time_variables()) {
    const char *v = std::getenv(std::string(name).c_str());
    KeyField f;
    f.name = "nvrtc env " + std::string(name);
    f.value = v ? "=" + std::string(v) : "unset";
    f.shown = v ? v : "unset";
    fields.push_back(f);
  }
  return fields;
}

void expect_as_getenv(const std::vector<KeyField> &got) {
  const std::vector<KeyField> want = by_getenv();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tag, got[0].tag) << want[i].name;  // the key's one environment tag
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].value, want[i].value) << want[i].name;
    EXPECT_EQ(got[i].shown, want[i].shown) << want[i].name;
  }
}

// Runs check with environ set to entries (restored after).
template <typename Check>
void with_environment(std::vector<std::string> entries, Check &&check) {
  std::vector<char *> env;
  for (std::string &e : entries) env.push_back(e.data());
  env.push_back(nullptr);
  char **const saved = environ;
  environ = env.data();
  check();
  environ = saved;
}

const KeyField &field(const std::vector<KeyField> &fields, std::string_view variable) {
  for (const KeyField &f : fields)
    if (f.name == "nvrtc env " + std::string(variable)) return f;
  throw std::runtime_error("no field for " + std::string(variable));
}

}  // namespace

TEST(EnvironmentFields, AnswerAsGetenvForEveryFormOfEntry) {
  with_environment(
      {"PATH=/usr/bin", "NVRTC_DISABLE_PCH=1", "TMPDIR=/a=b", "NVRTC_APPEND_FLAGS=", "EDG_BASE",
       "NVRTC_DISABLE_PCH=2", "NVRTCX=1", "NVRT=2", "NVRTC_PCH_HEAP_SIZE", "NVRTC_PCH_HEAP_SIZE=9",
       "=orphan", "bar=baz"},
      [] {
        const std::vector<KeyField> got = progcache::nvrtc_environment_fields();
        expect_as_getenv(got);
        EXPECT_EQ(field(got, "NVRTC_DISABLE_PCH").value, "=1");  // the first entry wins
        EXPECT_EQ(field(got, "TMPDIR").value, "=/a=b");
        EXPECT_EQ(field(got, "NVRTC_APPEND_FLAGS").value, "=");  // set, empty: not unset
        EXPECT_EQ(field(got, "EDG_BASE").value, "unset");        // no '=': names nothing
        EXPECT_EQ(field(got, "NVRTC_PCH_HEAP_SIZE").value, "=9");
        EXPECT_EQ(field(got, "NVRTC").value, "unset");  // NVRTCX and NVRT are other names
        EXPECT_EQ(field(got, "bar").shown, "baz");
      });
  with_environment({}, [] { expect_as_getenv(progcache::nvrtc_environment_fields()); });
  char **const saved = environ;
  environ = nullptr;
  const std::vector<KeyField> none = progcache::nvrtc_environment_fields();
  environ = saved;
  for (const KeyField &f : none) EXPECT_EQ(f.value, "unset") << f.name;
}

TEST(EnvironmentFields, FollowSetenvAndUnsetenv) {
  ASSERT_EQ(setenv("NVVM_IR_VER_CHK", "0", 1), 0);
  EXPECT_EQ(field(progcache::nvrtc_environment_fields(), "NVVM_IR_VER_CHK").value, "=0");
  expect_as_getenv(progcache::nvrtc_environment_fields());
  ASSERT_EQ(setenv("NVVM_IR_VER_CHK", "1", 1), 0);
  EXPECT_EQ(field(progcache::nvrtc_environment_fields(), "NVVM_IR_VER_CHK").value, "=1");
  ASSERT_EQ(unsetenv("NVVM_IR_VER_CHK"), 0);
  EXPECT_EQ(field(progcache::nvrtc_environment_fields(), "NVVM_IR_VER_CHK").value, "unset");
  expect_as_getenv(progcache::nvrtc_environment_fields());
}
