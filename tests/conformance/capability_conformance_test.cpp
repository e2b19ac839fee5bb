// The table "Primitives on each backend" in docs/backends.md, checked
// against every backend: a "yes" must be a primitive whose factory works
// there, a "no" one whose factory throws unsupported (without a remote
// call). The public headers point at that table instead of listing
// backends themselves, so this is what keeps them true.
#include "conformance_fixture.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace dlock::test {
namespace {

// The cells of the table's rows (leading and trailing '|' dropped, cells
// trimmed), header and separator rows left out.
std::vector<std::vector<std::string>> primitives_table() {
  std::ifstream docs(DLOCK_SOURCE_DIR "/docs/backends.md");
  EXPECT_TRUE(docs) << "cannot read docs/backends.md";
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool in_section = false;
  while (std::getline(docs, line)) {
    if (line.starts_with("## ")) {
      if (in_section) break;
      in_section = line == "## Primitives on each backend";
      continue;
    }
    if (!in_section || !line.starts_with("| `")) continue;
    std::vector<std::string> cells;
    std::stringstream cut(line.substr(1));
    for (std::string cell; std::getline(cut, cell, '|');) {
      const auto first = cell.find_first_not_of(' '), last = cell.find_last_not_of(' ');
      cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
    }
    rows.push_back(std::move(cells));
  }
  return rows;
}

// The row whose first cell names `url`'s scheme (`<scheme>://`), in its
// mode=session form if the URL asks for that mode.
const std::vector<std::string>* row_of(const std::vector<std::vector<std::string>>& rows, const std::string& url) {
  const std::string scheme = url.substr(0, url.find("://"));
  const bool session = url.find("mode=session") != std::string::npos;
  const std::string named = "`" + scheme + "://" + (session ? "…?mode=session`" : "`");
  for (const auto& row : rows)
    if (!row.empty() && row[0].find(named) != std::string::npos) return &row;
  return nullptr;
}

class CapabilityConformance : public ConformanceFixture {};

TEST_P(CapabilityConformance, TheDocsTableSaysWhatTheBackendHas) {
  const auto rows = primitives_table();
  ASSERT_FALSE(rows.empty()) << "docs/backends.md has no table under '## Primitives on each backend'";
  const auto* row = row_of(rows, url());
  ASSERT_NE(row, nullptr) << "docs/backends.md's primitives table has no row for " << url();
  ASSERT_EQ(row->size(), 8u) << "a row has the backend and seven columns: " << (*row)[0];

  auto c = client();
  const std::string name = name_in("capabilities");
  // Each column's factory; none makes a remote call.
  const std::vector<std::pair<std::string, std::function<void()>>> columns = {
      {"Mutex", [&] { (void)c->mutex(name); }},
      {"fair", [&] { (void)c->mutex(name, {.fair = true}); }},
      {"SharedMutex", [&] { (void)c->shared_mutex(name); }},
      {"Semaphore", [&] { (void)c->semaphore(name, 2); }},
      {"Election", [&] { (void)c->election(name); }},
      {"Counter", [&] { (void)c->counter(name); }},
      {"Barrier", [&] { (void)c->barrier(name, 2); }},
  };
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::string& cell = (*row)[i + 1];
    ASSERT_TRUE(cell.starts_with("yes") || cell.starts_with("no"))
        << columns[i].first << " of " << (*row)[0] << ": '" << cell << "' is neither yes nor no";
    const bool documented = cell.starts_with("yes");
    bool works = true;
    try {
      columns[i].second();
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), errc::unsupported) << columns[i].first << ": " << e.what();
      works = false;
    }
    EXPECT_EQ(works, documented) << columns[i].first << " on " << GetParam().name << ": docs/backends.md says '"
                                 << cell << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CapabilityConformance, ::testing::ValuesIn(backends_under_test()),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace dlock::test
