#include "runtime/common/rdma_env.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hccltune {

bool HcaList::Allows(absl::string_view device, int port) const {
  if (items.empty()) return true;
  bool listed = false;
  for (const Item& i : items) {
    const bool name = exact ? device == i.device : absl::StartsWith(device, i.device);
    listed = listed || (name && (i.port == 0 || i.port == port));
  }
  return exclude ? !listed : listed;
}

std::string HcaList::ToString() const {
  if (items.empty()) return "";
  std::string out = absl::StrCat(exclude ? "^" : "", exact ? "=" : "");
  for (size_t k = 0; k < items.size(); ++k) {
    absl::StrAppend(&out, k ? "," : "", items[k].device);
    if (items[k].port != 0) absl::StrAppend(&out, ":", items[k].port);
  }
  return out;
}

absl::StatusOr<HcaList> ParseHcaList(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HCCL_TUNE_IB_HCA='", text, "' is invalid: expected [^][=]DEVICE[:PORT][,DEVICE[:PORT]...] (", why, ")"));
  };
  HcaList list;
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  list.exclude = absl::ConsumePrefix(&rest, "^");
  list.exact = absl::ConsumePrefix(&rest, "=");
  if (rest.empty()) return list.exclude || list.exact ? bad("no device named") : absl::StatusOr<HcaList>(list);
  for (absl::string_view item : absl::StrSplit(rest, ',')) {
    item = absl::StripAsciiWhitespace(item);
    HcaList::Item i;
    const size_t colon = item.find(':');
    i.device = std::string(item.substr(0, colon));
    if (i.device.empty()) return bad("an empty device name");
    for (char c : i.device) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
        return bad(absl::StrCat("'", i.device, "' is not a device name"));
      }
    }
    if (colon != absl::string_view::npos &&
        (!absl::SimpleAtoi(item.substr(colon + 1), &i.port) || i.port < 1 || i.port > 255)) {
      return bad(absl::StrCat("'", item, "': a port is a number from 1 to 255"));
    }
    list.items.push_back(std::move(i));
  }
  return list;
}

}  // namespace hccltune
