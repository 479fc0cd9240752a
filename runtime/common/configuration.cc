#include "runtime/common/configuration.h"

#include <array>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/sizes.h"

namespace hccltune {
namespace {

using P = ParamKind;

const std::vector<AlgorithmSpec>& Catalogue() {
  static const auto* catalogue = new std::vector<AlgorithmSpec>{
      {"ring", {P::kChunk, P::kChannels, P::kLink}, "logical ring, chunked and pipelined"},
      {"double_ring", {P::kChunk, P::kChannels, P::kLink}, "two opposite rings, half the data each"},
      {"halving_doubling", {P::kChannels, P::kLink}, "recursive halving then doubling (Rabenseifner)"},
      {"recursive_doubling", {P::kChannels, P::kLink}, "log2(n) pairwise exchanges of the whole buffer"},
      {"binomial_tree", {P::kChannels, P::kLink}, "binomial tree rooted at the root rank"},
      {"double_binary_tree",
       {P::kChunk, P::kChannels, P::kLink},
       "two complementary binary trees, half the data each, pipelined"},
      {"one_shot", {P::kChannels, P::kLink}, "every rank exchanges its whole buffer with every other rank"},
      {"hierarchical", {P::kIntra, P::kInter, P::kForm}, "intra-node step, inter-node step, intra-node step"},
      {"bruck", {P::kChannels, P::kLink}, "Bruck's log-step algorithm with rotation"},
      {"pairwise", {P::kChannels, P::kLink}, "n-1 rounds of pairwise exchange"},
      {"chain", {P::kChunk, P::kChannels, P::kLink}, "pipelined chain from the root"},
      {"scatter_allgather", {P::kChannels, P::kLink}, "scatter from the root then ring allgather"},
      {"reducescatter_gather", {P::kChannels, P::kLink}, "reduce-scatter then gather to the root"},
      {"dissemination", {P::kLink}, "dissemination barrier, ceil(log2 n) rounds"},
      {"direct", {P::kChannels, P::kLink}, "every rank talks to every other rank directly"},
      {"linear", {P::kChannels, P::kLink}, "the root talks to every rank in turn"},
      {"symmetric", {P::kLink}, "every rank reduces its slice straight from the peers' mapped symmetric buffers"},
  };
  return *catalogue;
}

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Configuration> ParseTop() {
    auto c = ParseConfig();
    if (!c.ok()) return c.status();
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected trailing text");
    return c;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("configuration '", text_, "' at ", pos_, ": ", what));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  absl::string_view Identifier() {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }
  // A scalar value: everything up to the next ',' or ')' at this level.
  absl::string_view Scalar() {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != ')') ++pos_;
    return absl::StripTrailingAsciiWhitespace(text_.substr(start, pos_ - start));
  }

  absl::StatusOr<Configuration> ParseConfig() {
    const size_t name_pos = pos_;
    const std::string name = absl::AsciiStrToLower(Identifier());
    if (name.empty()) return Error("expected an algorithm name");
    const AlgorithmSpec* spec = FindAlgorithmSpec(name);
    if (spec == nullptr) {
      pos_ = name_pos;
      std::vector<absl::string_view> names;
      for (const auto& s : Catalogue()) names.push_back(s.name);
      return Error(absl::StrCat("unknown algorithm '", name, "'; accepted: ", absl::StrJoin(names, ", ")));
    }
    auto cfg = Configuration::Default(name);
    if (!cfg.ok()) return cfg.status();
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != '(') return cfg;
    ++pos_;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ')') {
      ++pos_;
      return cfg;
    }
    std::vector<ParamKind> seen;
    while (true) {
      const size_t key_pos = pos_;
      const std::string key = absl::AsciiStrToLower(Identifier());
      const ParamKind* kind = nullptr;
      for (const ParamKind& p : spec->params) {
        if (ParamName(p) == key) kind = &p;
      }
      if (kind == nullptr) {
        pos_ = key_pos;
        std::vector<absl::string_view> accepted;
        for (ParamKind p : spec->params) accepted.push_back(ParamName(p));
        return Error(absl::StrCat(key.empty() ? "expected a parameter name" : "unknown parameter '" + key + "'",
                                  " for ", spec->name, "; accepted: ", absl::StrJoin(accepted, ", ")));
      }
      for (ParamKind p : seen) {
        if (p == *kind) {
          pos_ = key_pos;
          return Error(absl::StrCat("parameter '", key, "' given twice"));
        }
      }
      seen.push_back(*kind);
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '=') return Error(absl::StrCat("expected '=' after '", key, "'"));
      ++pos_;
      if (absl::Status s = ParseValue(*kind, *cfg); !s.ok()) return s;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ')') {
        ++pos_;
        return cfg;
      }
      return Error("expected ',' or ')'");
    }
  }

  absl::Status ParseValue(ParamKind kind, Configuration& cfg) {
    const size_t value_pos = pos_;
    switch (kind) {
      case ParamKind::kIntra:
      case ParamKind::kInter: {
        SkipSpace();
        auto sub = ParseConfig();
        if (!sub.ok()) return sub.status();
        if (sub->algorithm == "hierarchical") {
          pos_ = value_pos;
          return Error("hierarchical cannot nest another hierarchical step");
        }
        auto ptr = std::make_shared<const Configuration>(*std::move(sub));
        (kind == ParamKind::kIntra ? cfg.intra : cfg.inter) = std::move(ptr);
        return absl::OkStatus();
      }
      case ParamKind::kChunk: {
        auto bytes = ParseBytes(Scalar());
        if (!bytes.ok() || *bytes == 0) {
          pos_ = value_pos;
          return Error("chunk must be a positive byte size such as 256K or 1M");
        }
        cfg.chunk = *bytes;
        return absl::OkStatus();
      }
      case ParamKind::kChannels: {
        int n = 0;
        if (!absl::SimpleAtoi(Scalar(), &n) || n < 1 || n > kMaxChannels) {
          pos_ = value_pos;
          return Error(absl::StrCat("channels must be an integer from 1 to ", kMaxChannels));
        }
        cfg.channels = n;
        return absl::OkStatus();
      }
      case ParamKind::kForm: {
        const std::string form = absl::AsciiStrToLower(Scalar());
        if (form == "auto") {
          cfg.form = HierForm::kAuto;
        } else if (form == "parallel") {
          cfg.form = HierForm::kParallel;
        } else if (form == "leader") {
          cfg.form = HierForm::kLeader;
        } else {
          pos_ = value_pos;
          return Error(absl::StrCat("unknown form '", form, "'; accepted: auto, parallel, leader"));
        }
        return absl::OkStatus();
      }
      case ParamKind::kLink: {
        auto link = ParseLink(Scalar());
        if (!link.ok()) {
          pos_ = value_pos;
          return Error(link.status().message());
        }
        cfg.link = *std::move(link);
        return absl::OkStatus();
      }
    }
    return Error("internal: unknown parameter kind");
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// The step a hierarchical configuration uses where none was given.
const Configuration& DefaultStep() {
  static const auto* step = [] {
    auto* c = new Configuration();
    c->algorithm = "ring";
    return c;
  }();
  return *step;
}

}  // namespace

absl::string_view LinkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::kAuto: return "auto";
    case LinkKind::kShm: return "shm";
    case LinkKind::kTcp: return "tcp";
    case LinkKind::kRoce: return "roce";
    case LinkKind::kUcx: return "ucx";
    case LinkKind::kIb: return "ib";
  }
  return "auto";
}

absl::StatusOr<LinkSpec> ParseLink(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  const size_t at = lower.find('@');
  const std::string kind_text = lower.substr(0, at);
  LinkSpec link;
  if (kind_text == "auto") {
    link.kind = LinkKind::kAuto;
  } else if (kind_text == "shm") {
    link.kind = LinkKind::kShm;
  } else if (kind_text == "tcp") {
    link.kind = LinkKind::kTcp;
  } else if (kind_text == "roce") {
    link.kind = LinkKind::kRoce;
  } else if (kind_text == "ucx") {
    link.kind = LinkKind::kUcx;
  } else if (kind_text == "ib") {
    link.kind = LinkKind::kIb;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown link '", text,
                     "'; accepted: auto, shm, tcp, tcp@SUBNET, ucx, ucx@SUBNET, roce, roce@SUBNET, ib, ib@SUBNET"));
  }
  if (at != std::string::npos) {
    if (link.kind == LinkKind::kAuto || link.kind == LinkKind::kShm) {
      return absl::InvalidArgumentError(absl::StrCat("link '", text, "': only tcp, ucx, roce and ib take @SUBNET"));
    }
    link.network = lower.substr(at + 1);
    // A subnet is ADDRESS/PREFIX; full validation happens where interfaces are resolved.
    const size_t slash = link.network.find('/');
    int prefix = -1;
    if (link.network.empty() || slash == std::string::npos ||
        !absl::SimpleAtoi(link.network.substr(slash + 1), &prefix) || prefix < 0 || prefix > 128) {
      return absl::InvalidArgumentError(
          absl::StrCat("link '", text, "': the network must be a subnet such as 10.20.0.0/16"));
    }
  }
  return link;
}

std::string FormatLink(const LinkSpec& link) {
  std::string out(LinkKindName(link.kind));
  if (!link.network.empty()) absl::StrAppend(&out, "@", link.network);
  return out;
}

absl::string_view ParamName(ParamKind p) {
  switch (p) {
    case ParamKind::kChunk: return "chunk";
    case ParamKind::kChannels: return "channels";
    case ParamKind::kLink: return "link";
    case ParamKind::kIntra: return "intra";
    case ParamKind::kInter: return "inter";
    case ParamKind::kForm: return "form";
  }
  return "";
}

absl::string_view HierFormName(HierForm f) {
  switch (f) {
    case HierForm::kAuto: return "auto";
    case HierForm::kParallel: return "parallel";
    case HierForm::kLeader: return "leader";
  }
  return "auto";
}

absl::Span<const AlgorithmSpec> AlgorithmCatalogue() { return Catalogue(); }

const AlgorithmSpec* FindAlgorithmSpec(absl::string_view name) {
  for (const auto& s : Catalogue()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool Configuration::Has(ParamKind p) const {
  const AlgorithmSpec* spec = FindAlgorithmSpec(algorithm);
  if (spec == nullptr) return false;
  for (ParamKind q : spec->params) {
    if (q == p) return true;
  }
  return false;
}

std::string Configuration::ToString() const {
  const AlgorithmSpec* spec = FindAlgorithmSpec(algorithm);
  if (spec == nullptr) return algorithm;
  std::vector<std::string> parts;
  for (ParamKind p : spec->params) {
    switch (p) {
      case ParamKind::kChunk: parts.push_back(absl::StrCat("chunk=", FormatBytes(chunk))); break;
      case ParamKind::kChannels: parts.push_back(absl::StrCat("channels=", channels)); break;
      case ParamKind::kLink: parts.push_back(absl::StrCat("link=", FormatLink(link))); break;
      case ParamKind::kIntra:
        parts.push_back(absl::StrCat("intra=", intra ? intra->ToString() : DefaultStep().ToString()));
        break;
      case ParamKind::kInter:
        parts.push_back(absl::StrCat("inter=", inter ? inter->ToString() : DefaultStep().ToString()));
        break;
      case ParamKind::kForm:
        if (form != HierForm::kAuto) parts.push_back(absl::StrCat("form=", HierFormName(form)));
        break;
    }
  }
  return absl::StrCat(algorithm, "(", absl::StrJoin(parts, ","), ")");
}

absl::StatusOr<Configuration> Configuration::Parse(absl::string_view text) { return Parser(text).ParseTop(); }

absl::StatusOr<Configuration> Configuration::Default(absl::string_view algorithm) {
  const AlgorithmSpec* spec = FindAlgorithmSpec(algorithm);
  if (spec == nullptr) return Parse(algorithm);  // produces the "unknown algorithm" error
  Configuration c;
  c.algorithm = std::string(spec->name);
  if (c.algorithm == "hierarchical") {
    // Defaults per step; the registry may refine them for the collective at hand.
    auto step = std::make_shared<const Configuration>(DefaultStep());
    c.intra = step;
    c.inter = step;
  }
  return c;
}

}  // namespace hccltune
