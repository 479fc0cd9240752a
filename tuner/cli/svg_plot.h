// An inline SVG chart shared by `report` (measured) and `simulate` (predicted): busbw against size, one curve per
// algorithm, the winner of each byte range as a labelled band.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "db/tuning_store.h"

namespace hccltune::cli {

// `s` with & < > " escaped for HTML.
std::string HtmlEscape(absl::string_view s);

struct Curve {
  std::map<uint64_t, std::pair<double, std::string>> best;  // bytes -> (busbw GB/s, configuration)
};

// An <h2> title and the SVG (empty when no curve has a point); `winners` are the bands, in byte order.
std::string Plot(const std::string& title, const std::map<std::string, Curve>& curves,
                 const std::vector<db::TunedEntry>& winners);

}  // namespace hccltune::cli
