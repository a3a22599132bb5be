// OpenIndex (the memory store's key index) against std::map under random inserts, erases and
// lookups: with the real hash, with every key in one probe run (one hash for all), and with a
// few hashes that wrap around the table's end, where erasing by backward shift is easiest to get
// wrong (a key left behind a hole is lost, one moved before its home is found twice or never).
#include "util/open_index.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <string_view>

namespace {

using Values = std::map<std::string, int>;

struct KeyOf {
  std::string_view operator()(Values::iterator it) const { return it->first; }
};

// Values live in a std::map (stable iterators); the index maps each key to its iterator.
template <typename Hash>
void check_against_map(Hash hash, unsigned seed, int key_range) {
  std::mt19937 rng(seed);
  Values values;
  progcache::OpenIndex<Values::iterator, KeyOf, Hash> index(KeyOf{}, hash);
  for (int op = 0; op < 20000; ++op) {
    const std::string key = "k" + std::to_string(rng() % unsigned(key_range));
    switch (rng() % 3) {
      case 0:
        if (!values.count(key)) index.insert(values.emplace(key, op).first);
        break;
      case 1: {
        const bool erased = index.erase(key);
        ASSERT_EQ(erased, values.erase(key) == 1) << key;
        break;
      }
      default: {
        Values::iterator *found = index.find(key);
        const auto it = values.find(key);
        ASSERT_EQ(found != nullptr, it != values.end()) << key;
        if (found) {
          ASSERT_EQ((*found)->second, it->second) << key;
        }
      }
    }
    ASSERT_EQ(index.size(), values.size());
    if (op % 5000 == 4999) {  // every key findable, none of the absent ones
      for (int k = 0; k < key_range; ++k) {
        const std::string probe = "k" + std::to_string(k);
        ASSERT_EQ(index.find(probe) != nullptr, values.count(probe) == 1) << probe;
      }
    }
  }
  index.clear();
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.find("k1"), nullptr);
}

}  // namespace

TEST(OpenIndex, MatchesAMapWithTheRealHash) {
  check_against_map(std::hash<std::string_view>{}, 1, 3000);
}

TEST(OpenIndex, MatchesAMapWhenEveryKeyCollides) {
  check_against_map([](std::string_view) { return uint64_t(7); }, 2, 60);
}

TEST(OpenIndex, MatchesAMapWhenRunsWrapAroundTheTable) {
  // Homes near the end of any power-of-two table (all bits set), and zero, the empty mark.
  const auto hash = [](std::string_view key) {
    const uint64_t h = std::hash<std::string_view>{}(key) % 4;
    return h == 0 ? uint64_t(0) : ~uint64_t(0) - h;
  };
  check_against_map(hash, 3, 40);
}

TEST(OpenIndex, KeysThatShareAHashAreToldApartByTheirBytes) {
  Values values{{"a", 1}, {"b", 2}};
  progcache::OpenIndex<Values::iterator, KeyOf, uint64_t (*)(std::string_view)> index(
      KeyOf{}, [](std::string_view) { return uint64_t(42); });
  index.insert(values.find("a"));
  index.insert(values.find("b"));
  ASSERT_NE(index.find("b"), nullptr);
  EXPECT_EQ((*index.find("b"))->second, 2);
  EXPECT_TRUE(index.erase("a"));
  EXPECT_EQ(index.find("a"), nullptr);
  ASSERT_NE(index.find("b"), nullptr);
  EXPECT_EQ((*index.find("b"))->second, 2);
  EXPECT_EQ(index.find("c"), nullptr);
}
