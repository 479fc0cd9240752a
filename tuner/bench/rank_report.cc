#include "tuner/bench/rank_report.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace hccltune::bench {
namespace {

std::atomic<int> g_report_fd{-1};
std::atomic<bool> g_reported{false};

// The longest message a report carries: the runtime's errors are a few hundred bytes; one that quotes a long
// chain is cut here (the rank's own stderr has it whole).
constexpr size_t kMaxMessage = 4096;

// "1, 2 never ..." / " 2 3 never ...": the rest of a list of ranks followed by " never".
bool ListThenNever(absl::string_view after) {
  const size_t never = after.find(" never ");
  if (never == absl::string_view::npos) return false;
  for (char c : after.substr(0, never)) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != ',' && c != ' ') return false;
  }
  return true;
}

}  // namespace

void NameRankProcess(std::optional<int> rank) {
  if (!rank) return;
  const std::string name = absl::StrCat("hccl-tune/r", *rank);
  if (name.size() > 15) return;  // the kernel would cut the number: "hccl-tune/r1234" of rank 12345
  (void)::prctl(PR_SET_NAME, name.c_str(), 0, 0, 0);
}

void SetReportFd(int fd) {
  if (fd < 0) return;
  (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
  g_report_fd.store(fd);
}

int ReportRankFailure(const absl::Status& s, int exit_code) {
  const int fd = g_report_fd.load();
  if (fd < 0 || s.ok() || g_reported.exchange(true)) return exit_code;
  nlohmann::json j{{"code", absl::StatusCodeToString(s.code())},
                   {"message", std::string(s.message().substr(0, kMaxMessage))}};
  if (auto peer = BlamedPeer(s.message())) j["peer"] = *peer;
  // Invalid UTF-8 in a message (a path) is replaced rather than thrown on.
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  for (size_t off = 0; off < line.size();) {
    const ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the spawner is gone: its own end says what happened
    off += static_cast<size_t>(n);
  }
  return exit_code;
}

std::optional<int> BlamedPeer(absl::string_view m) {
  for (size_t at = m.find("rank"); at != absl::string_view::npos; at = m.find("rank", at + 1)) {
    if (at > 0 && absl::ascii_isalnum(static_cast<unsigned char>(m[at - 1]))) continue;
    size_t p = at + 4;
    const bool plural = p < m.size() && m[p] == 's';
    if (plural) ++p;
    if (p >= m.size() || m[p] != ' ') continue;
    const size_t digits = ++p;
    while (p < m.size() && p - digits < 8 && absl::ascii_isdigit(static_cast<unsigned char>(m[p]))) ++p;
    int n = 0;
    if (p == digits || !absl::SimpleAtoi(m.substr(digits, p - digits), &n)) continue;
    const absl::string_view before = m.substr(0, at);
    const absl::string_view after = m.substr(p);
    if (plural) {
      if (ListThenNever(after)) return n;  // "ranks 1, 2 never joined", "connections from ranks 1 2 never arrived"
      continue;
    }
    if (absl::StartsWith(after, " aborted ") || absl::StartsWith(after, " could not set up the communicator")) {
      // Another rank's announcement: blame what it blamed, else that rank.
      const size_t colon = after.find(": ");
      if (colon != absl::string_view::npos) {
        if (auto inner = BlamedPeer(after.substr(colon + 2))) return inner;
      }
      return n;
    }
    if (absl::StartsWith(after, " refused ") || absl::StartsWith(after, " (pid ") ||
        absl::StartsWith(after, " stopped the sweep")) {
      return n;
    }
    for (absl::string_view lead : {"for ", "link to ", "connect to ", "is "}) {
      if (absl::EndsWith(before, lead)) return n;
    }
  }
  return std::nullopt;
}

}  // namespace hccltune::bench
