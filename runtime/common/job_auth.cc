#include "runtime/common/job_auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "runtime/common/bounded_read.h"
#include "runtime/common/logging.h"

namespace hccltune {
namespace {

constexpr absl::string_view kAcceptorLabel = "hccl-tune acceptor";
constexpr absl::string_view kConnectorLabel = "hccl-tune connector";
constexpr size_t kMaxWhitelistBytes = 1 << 20;

bool IsIpv4(const std::string& s) {
  in_addr a{};
  return ::inet_pton(AF_INET, s.c_str(), &a) == 1;
}

absl::StatusOr<std::string> CheckedSecret(std::string secret, absl::string_view origin) {
  secret = std::string(absl::StripTrailingAsciiWhitespace(secret));
  if (secret.size() < kMinJobSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": a job secret of ", secret.size(),
                                                   " characters; at least ", kMinJobSecretBytes,
                                                   " are needed (e.g. head -c 32 /dev/urandom | base64)"));
  }
  return secret;
}

// The mode byte of a message, or -1 when it is neither 0 nor 1.
int ModeOf(absl::string_view msg) {
  if (msg.empty()) return -1;
  const auto m = static_cast<uint8_t>(msg[0]);
  return m <= 1 ? m : -1;
}

}  // namespace

bool JobAuth::Whitelisted(const std::string& ip) const {
  return !whitelist || std::find(whitelist->begin(), whitelist->end(), ip) != whitelist->end();
}

absl::StatusOr<std::string> ReadJobSecretFile(const std::string& path) {
  const std::string what = absl::StrCat("HCCL_TUNE_JOB_SECRET_FILE=", path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(what, ": cannot open: ", std::strerror(errno)));
  // Checked and read through one descriptor, so the file checked is the file read.
  struct stat st {};
  absl::Status bad;
  if (::fstat(fd, &st) != 0) {
    bad = absl::FailedPreconditionError(absl::StrCat(what, ": cannot stat: ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    bad = absl::FailedPreconditionError(absl::StrCat(what, ": not a regular file"));
  } else if ((st.st_mode & 077) != 0) {
    bad = absl::FailedPreconditionError(absl::StrFormat(
        "%s: mode %04o lets other users read the job secret; it must be 0600 or stricter (chmod 600 %s)", what,
        st.st_mode & 07777, path));
  } else if (st.st_uid != ::geteuid()) {
    bad = absl::FailedPreconditionError(absl::StrCat(what, ": owned by uid ", st.st_uid,
                                                     "; the job secret file must be owned by this user (uid ",
                                                     ::geteuid(), ")"));
  }
  std::string text(kMaxJobSecretBytes + 1, '\0');
  size_t got = 0;
  while (bad.ok() && got < text.size()) {
    const ssize_t r = ::read(fd, text.data() + got, text.size() - got);
    if (r == 0) break;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) bad = absl::FailedPreconditionError(absl::StrCat(what, ": cannot read: ", std::strerror(errno)));
    if (r > 0) got += static_cast<size_t>(r);
  }
  ::close(fd);
  if (!bad.ok()) return bad;
  if (got > kMaxJobSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": over the limit of ", kMaxJobSecretBytes, " bytes"));
  }
  text.resize(got);
  return CheckedSecret(std::move(text), what);
}

absl::StatusOr<std::vector<std::string>> ReadWhitelistFile(const std::string& path) {
  const std::string what = absl::StrCat("HCCL_WHITELIST_FILE=", path);
  auto text = ReadFileAtMost(path, kMaxWhitelistBytes, "HCCL_WHITELIST_FILE");
  if (!text.ok()) return text.status();
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("host_ip") || !j["host_ip"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected {\"host_ip\": [\"ip1\", \"ip2\"], \"device_ip\": [...]} (HCCL's format)"));
  }
  std::vector<std::string> ips;
  for (const auto& e : j["host_ip"]) {
    if (!e.is_string() || !IsIpv4(e.get<std::string>())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": host_ip entry ", e.dump(), " is not a dotted-decimal IPv4 address"));
    }
    ips.push_back(e.get<std::string>());
  }
  return ips;
}

absl::StatusOr<JobAuth> LoadJobAuth(const Environment& env) {
  JobAuth auth;
  if (!env.job_secret.empty()) {
    auto s = CheckedSecret(env.job_secret, "HCCL_TUNE_JOB_SECRET");
    if (!s.ok()) return s.status();
    auth.secret = *std::move(s);
  } else if (!env.job_secret_file.empty()) {
    auto s = ReadJobSecretFile(env.job_secret_file);
    if (!s.ok()) return s.status();
    auth.secret = *std::move(s);
  }
  if (env.whitelist_enabled) {
    auto ips = ReadWhitelistFile(env.whitelist_file);
    if (!ips.ok()) return ips.status();
    auth.whitelist = *std::move(ips);
    auth.whitelist_file = env.whitelist_file;
  }
  static std::atomic<bool> said{false};
  if (!auth.has_secret() && !said.exchange(true)) {
    Log(LogLevel::kInfo,
        "no job secret (HCCL_TUNE_JOB_SECRET, HCCL_TUNE_JOB_SECRET_FILE): this job's TCP and store connections are "
        "not authenticated (docs/SECURITY.md)");
  }
  return auth;
}

std::string NewNonce() {
  std::string n(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1) {
    // OpenSSL without entropy: the kernel's generator directly (a nonce need not be secret, only fresh).
    size_t got = 0;
    while (got < n.size()) {
      const ssize_t r = ::getrandom(n.data() + got, n.size() - got, 0);
      if (r > 0) got += static_cast<size_t>(r);
      if (r < 0 && errno != EINTR) break;
    }
  }
  return n;
}

std::string JobMac(absl::string_view secret, absl::string_view label, absl::string_view first, absl::string_view second,
                   absl::string_view context) {
  std::string msg = absl::StrCat(label, first, second, context);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

bool MacEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string MakeOffer(const JobAuth& auth, std::string* nonce_c) {
  *nonce_c = auth.has_secret() ? NewNonce() : "";
  return absl::StrCat(std::string(1, auth.has_secret() ? '\1' : '\0'), *nonce_c);
}

size_t OfferRestBytes(uint8_t mode) { return mode == 1 ? kNonceBytes : 0; }
size_t ChallengeRestBytes(uint8_t mode) { return mode == 1 ? kNonceBytes + kMacBytes : 0; }

AcceptorStep AnswerOffer(const JobAuth& auth, absl::string_view offer, absl::string_view context) {
  AcceptorStep step;
  step.reply = std::string(1, auth.has_secret() ? '\1' : '\0');
  const int mode = ModeOf(offer);
  if (mode < 0 || offer.size() != 1 + OfferRestBytes(static_cast<uint8_t>(mode))) {
    step.verdict = absl::InvalidArgumentError("not an hccl-tune handshake offer");
    step.reply.clear();  // a stranger learns nothing
  } else if (mode == 1 && !auth.has_secret()) {
    step.verdict = absl::PermissionDeniedError(
        "it holds a job secret and this rank has none (set HCCL_TUNE_JOB_SECRET or _FILE on every rank)");
  } else if (mode == 0 && auth.has_secret()) {
    step.verdict = absl::PermissionDeniedError("it proves no job secret (HCCL_TUNE_JOB_SECRET unset on that side?)");
  } else if (mode == 1) {
    step.nonce_a = NewNonce();
    absl::StrAppend(&step.reply, step.nonce_a,
                    JobMac(auth.secret, kAcceptorLabel, offer.substr(1), step.nonce_a, context));
  }
  return step;
}

absl::StatusOr<std::string> CheckChallenge(const JobAuth& auth, absl::string_view nonce_c, absl::string_view challenge,
                                           absl::string_view context, absl::string_view peer) {
  const int mode = ModeOf(challenge);
  if (mode < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(peer, " answered the connection handshake with bytes that are not a challenge"));
  }
  if (mode == 0 && auth.has_secret()) {
    return absl::PermissionDeniedError(
        absl::StrCat(peer,
                     " holds no job secret while this process has one: set the same HCCL_TUNE_JOB_SECRET or "
                     "HCCL_TUNE_JOB_SECRET_FILE on every rank"));
  }
  if (mode == 1 && !auth.has_secret()) {
    return absl::PermissionDeniedError(
        absl::StrCat(peer,
                     " requires a job secret and this process has none: set HCCL_TUNE_JOB_SECRET or "
                     "HCCL_TUNE_JOB_SECRET_FILE on every rank"));
  }
  if (challenge.size() != 1 + ChallengeRestBytes(static_cast<uint8_t>(mode))) {
    return absl::PermissionDeniedError(absl::StrCat(peer, " answered the connection handshake with a challenge of ",
                                                    challenge.size(), " bytes (expected ",
                                                    1 + ChallengeRestBytes(static_cast<uint8_t>(mode)), ")"));
  }
  if (mode == 0) return std::string();
  const absl::string_view nonce_a = challenge.substr(1, kNonceBytes);
  const absl::string_view mac_a = challenge.substr(1 + kNonceBytes);
  if (!MacEquals(mac_a, JobMac(auth.secret, kAcceptorLabel, nonce_c, nonce_a, context))) {
    return absl::PermissionDeniedError(
        absl::StrCat(peer,
                     " did not prove this job's secret (its handshake MAC does not match): a different "
                     "HCCL_TUNE_JOB_SECRET on that rank, or not a process of this job"));
  }
  return JobMac(auth.secret, kConnectorLabel, nonce_a, nonce_c, context);
}

absl::Status CheckProof(const JobAuth& auth, absl::string_view offer, absl::string_view nonce_a,
                        absl::string_view proof, absl::string_view context) {
  if (offer.size() != 1 + kNonceBytes || nonce_a.size() != kNonceBytes) {
    return absl::InvalidArgumentError("a proof without a secret-holding offer");
  }
  if (!MacEquals(proof, JobMac(auth.secret, kConnectorLabel, nonce_a, offer.substr(1), context))) {
    return absl::PermissionDeniedError(
        "its handshake MAC does not match: a different HCCL_TUNE_JOB_SECRET, or not a process of this job");
  }
  return absl::OkStatus();
}

bool NoteRefusal(absl::string_view listener, const std::string& address, absl::string_view why) {
  static absl::Mutex mu;
  static std::set<std::string>& noted = *new std::set<std::string>;  // never destroyed (exit-time logging)
  static uint64_t unnoted = 0;
  {
    absl::MutexLock lock(&mu);
    if (noted.count(address)) return false;
    if (noted.size() >= kMaxNotedAddresses) {
      if (++unnoted % 1000 != 1) return false;
      Log(LogLevel::kWarn, listener, ": refused connections from ", unnoted, " further addresses (only the first ",
          kMaxNotedAddresses, " are named)");
      return true;
    }
    noted.insert(address);
  }
  Log(LogLevel::kWarn, listener, ": refused a connection from ", address, ": ", why,
      " (further refusals of this address are not logged)");
  return true;
}

}  // namespace hccltune
