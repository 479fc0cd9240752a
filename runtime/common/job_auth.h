// Job membership for the job's own connections (docs/SECURITY.md, Job connections): the per-job secret
// (HCCL_TUNE_JOB_SECRET or HCCL_TUNE_JOB_SECRET_FILE), HCCL's address whitelist (HCCL_WHITELIST_DISABLE=0 with
// HCCL_WHITELIST_FILE), the mutual challenge-response every TCP data and store connection opens with, and the
// once-per-address log of refused connections.
//
// The handshake (the connector is the side that called connect(), the acceptor the listener's side):
//   connector -> acceptor  offer:     u8 mode (1: it holds a secret, 0: none), then with mode 1 nonce_c (32 bytes)
//   acceptor  -> connector challenge: u8 mode, then with mode 1 nonce_a (32) and mac_a (32)
//   connector -> acceptor  proof:     mac_c (32), only when both hold a secret
// mac_a = HMAC-SHA256(secret, "hccl-tune acceptor" || nonce_c || nonce_a || context),
// mac_c = HMAC-SHA256(secret, "hccl-tune connector" || nonce_a || nonce_c || context),
// where the context names the connection (the transport's tag, ranks, lane). Each side proves the secret over
// the other side's fresh nonce, so neither talks to an impostor and a recorded handshake does not replay; the
// secret never crosses the wire. The labels differ so one side's MAC is never the other's. MACs are compared in
// constant time (CRYPTO_memcmp). Modes that differ fail both ends: the connector's error names the acceptor's
// address, the acceptor logs the connector's. Without a secret on either side the exchange is the two mode bytes.
//
// Thread-safety: JobAuth is a plain value; the functions are pure except NewNonce (RAND_bytes, thread-safe) and
// NoteRefusal / LogNoSecretOnce (a mutex / an atomic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/config.h"

namespace hccltune {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
// The shortest secret accepted (characters of the variable or the file, trailing whitespace removed).
inline constexpr size_t kMinJobSecretBytes = 16;
inline constexpr size_t kMaxJobSecretBytes = 4096;
// A handshake that has not completed this long after the connection was accepted is dropped.
inline constexpr int64_t kHandshakeTimeoutMs = 5000;

struct JobAuth {
  std::string secret;                                 // the MAC key; empty: the job has none
  std::optional<std::vector<std::string>> whitelist;  // HCCL_WHITELIST_FILE's host_ip, when enabled
  std::string whitelist_file;                         // for messages

  bool has_secret() const { return !secret.empty(); }
  // Whether a connection from `ip` (dotted IPv4) passes the whitelist (always, when there is none).
  bool Whitelisted(const std::string& ip) const;
};

// The job's JobAuth from `env`: the secret from HCCL_TUNE_JOB_SECRET or the file HCCL_TUNE_JOB_SECRET_FILE (which
// must be a regular file owned by this user with no group or other permission bits; otherwise FailedPrecondition
// naming the file and its mode or owner), and the whitelist from HCCL_WHITELIST_FILE when HCCL_WHITELIST_DISABLE=0.
// Without a secret it logs once per process (info) that the job's connections are not authenticated.
absl::StatusOr<JobAuth> LoadJobAuth(const Environment& env);

// The secret in `path` (trailing whitespace removed), checked as LoadJobAuth says.
absl::StatusOr<std::string> ReadJobSecretFile(const std::string& path);
// The host_ip list of an HCCL whitelist file: {"host_ip": ["ip1", ...], "device_ip": [...]} (device_ip is
// reserved, as in HCCL); InvalidArgument naming the file and the entry that is not a dotted IPv4 address.
absl::StatusOr<std::vector<std::string>> ReadWhitelistFile(const std::string& path);

// kNonceBytes random bytes (RAND_bytes).
std::string NewNonce();
// HMAC-SHA256(secret, label || first || second || context).
std::string JobMac(absl::string_view secret, absl::string_view label, absl::string_view first, absl::string_view second,
                   absl::string_view context);
// Constant-time equality of two MACs (false when the lengths differ).
bool MacEquals(absl::string_view a, absl::string_view b);

// --- The handshake's messages (see the top of this file) ---

// The connector's offer; `nonce_c` receives the nonce it carries (empty without a secret).
std::string MakeOffer(const JobAuth& auth, std::string* nonce_c);
// The bytes of an offer or challenge after its mode byte.
size_t OfferRestBytes(uint8_t mode);
size_t ChallengeRestBytes(uint8_t mode);

struct AcceptorStep {
  std::string reply;     // the challenge to send, also when `verdict` refuses (the connector learns why)
  absl::Status verdict;  // OK: wait for the proof (with a secret) or the connection is accepted (without)
  std::string nonce_a;   // with a secret: the nonce the proof must cover
};
// The acceptor's answer to a complete `offer` for the connection `context`.
AcceptorStep AnswerOffer(const JobAuth& auth, absl::string_view offer, absl::string_view context);
// The connector's check of a complete `challenge` from the acceptor at `peer` (named in errors): the proof to
// send ("" when neither side holds a secret), or PermissionDenied naming `peer` and what was wrong.
absl::StatusOr<std::string> CheckChallenge(const JobAuth& auth, absl::string_view nonce_c, absl::string_view challenge,
                                           absl::string_view context, absl::string_view peer);
// The acceptor's check of the connector's proof.
absl::Status CheckProof(const JobAuth& auth, absl::string_view offer, absl::string_view nonce_a,
                        absl::string_view proof, absl::string_view context);

// Logs (warn) that `listener` refused a connection from `address` (an IP) and why, the first time only for each
// address in this process (at most kMaxNotedAddresses addresses are remembered; later ones are counted). True
// when this call logged.
inline constexpr size_t kMaxNotedAddresses = 4096;
bool NoteRefusal(absl::string_view listener, const std::string& address, absl::string_view why);

}  // namespace hccltune
